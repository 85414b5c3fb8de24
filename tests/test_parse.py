"""icl._parse: the one boolean parser, and the environment variables read through it
(``env_bool``/``env_number``): every declared ICL_* variable with a bad value is one line naming
it, its value and what is expected, wherever it is read and from the command line (exit 2)."""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from icl._parse import ENV_BOOLEANS, ENV_NUMBERS, EnvError, check_environment, env_bool, env_number, parse_bool

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, value", [("true", True), ("ON", True), (" yes ", True), ("1", True), (1, True),
                                         ("False", False), ("off", False), ("no", False), ("0", False), (0, False)])
def test_parse_bool_reads_the_usual_spellings(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["maybe", "", "2", 2, None, "enabled"])
def test_parse_bool_refuses_anything_else_naming_it(text):
    with pytest.raises(ValueError, match=r"^plots: expected true/false"):
        parse_bool(text, "plots")


def test_env_bool_and_env_number_keep_the_default_when_unset_or_blank(monkeypatch):
    monkeypatch.delenv("ICL_HELPERS", raising=False)
    monkeypatch.setenv("ICL_LPIPS_CACHE_MB", "  ")
    assert env_bool("ICL_HELPERS", True) is True and env_bool("ICL_HELPERS") is False
    assert env_number("ICL_LPIPS_CACHE_MB", 512) == 512
    monkeypatch.setenv("ICL_HELPERS", "off")
    monkeypatch.setenv("ICL_LPIPS_CACHE_MB", "0")
    monkeypatch.setenv("ICL_HELPER_SILENCE_S", "1.5")
    assert env_bool("ICL_HELPERS", True) is False and env_number("ICL_LPIPS_CACHE_MB", 512) == 0
    assert env_number("ICL_HELPER_SILENCE_S", 30.0) == 1.5


def test_an_undeclared_variable_is_a_programming_error_not_a_silent_read():
    with pytest.raises(KeyError):
        env_bool("ICL_NOT_DECLARED")
    with pytest.raises(KeyError):
        env_number("ICL_NOT_DECLARED", 1)


@pytest.mark.parametrize("name, text, expected", [
    ("ICL_DOWNLOAD_TRIES", "2.5", "a positive integer"),
    ("ICL_DOWNLOAD_TRIES", "0", "a positive integer"),
    ("ICL_LPIPS_CACHE_MB", "-1", "an integer >= 0 (MiB)"),
    ("ICL_DOWNLOAD_WINDOW", "0", "a finite number > 0 (seconds)"),
    ("ICL_DOWNLOAD_MIN_RATE", "nan", "a finite number >= 0 (bytes/s)"),
    ("ICL_DOWNLOAD_TIMEOUT", "inf", "a finite number >= 0 (seconds, 0: no limit)"),
    ("ICL_HUB_DEFAULTS", "maybe", "true/false (or 1/0, yes/no, on/off)"),
])
def test_a_bad_value_is_one_error_naming_the_variable_its_value_and_what_is_expected(monkeypatch, name, text,
                                                                                    expected):
    monkeypatch.setenv(name, text)
    with pytest.raises(EnvError) as err:
        check_environment()
    assert str(err.value) == f"{name}={text!r}: expected {expected}"
    assert (err.value.name, err.value.value) == (name, text)
    again = pickle.loads(pickle.dumps(err.value))  # a helper process hands it back as itself
    assert type(again) is EnvError and str(again) == str(err.value)


def _readers() -> dict[str, Callable[[], Any]]:
    """Each declared variable's reader, as the code that uses it calls it."""
    from icl.data import images
    from icl.data.convert import _common, _raw
    from icl.helpers import pools
    from icl.models import hub
    from icl.ops import _dispatch
    from icl.run.execution import pool
    from icl.run.planning import fetch

    lpips = importlib.import_module("icl.ops.lpips")  # icl.ops.lpips is also the function's name
    return {
        "ICL_HELPERS": lambda: pools.pool_size("lpips"),
        "ICL_STRICT_BACKEND": lambda: _dispatch.warn_fallback("op", [("native", "absent")], "torch"),
        "ICL_HUB_DEFAULTS": hub.downloads_allowed,
        "ICL_HELPER_SILENCE_S": lambda: pools._seconds("ICL_HELPER_SILENCE_S", pools.SILENCE_S),
        "ICL_HELPER_DEADLINE_S": lambda: pools._seconds("ICL_HELPER_DEADLINE_S", pools.DEADLINE_S),
        "ICL_WORKER_SILENCE_S": lambda: pool._seconds("ICL_WORKER_SILENCE_S", pool.SILENCE_S),
        "ICL_LPIPS_CACHE_MB": lpips._cache_limit,
        **{var: hub.download_limits for var in hub.LIMIT_VARS},
        "ICL_CONVERT_MAX_ARRAY_BYTES": _raw.max_array_bytes,
        "ICL_CONVERT_WORKERS": _common.workers,
        "ICL_MAX_IMAGE_PIXELS": images.max_pixels_default,
        **{var: fetch.unpack_limits for var in fetch.UNPACK_LIMITS},
    }


def test_every_declared_variable_has_a_reader_here():
    assert set(_readers()) == set(ENV_BOOLEANS) | set(ENV_NUMBERS)


@pytest.mark.parametrize("name", sorted(ENV_BOOLEANS | set(ENV_NUMBERS)))
def test_every_variable_with_a_bad_value_is_the_one_line_error_where_it_is_read(monkeypatch, name):
    monkeypatch.setenv(name, "lots")
    with pytest.raises(EnvError) as err:
        _readers()[name]()
    expected = "true/false (or 1/0, yes/no, on/off)" if name in ENV_BOOLEANS else ENV_NUMBERS[name].expected
    assert str(err.value) == f"{name}='lots': expected {expected}"


def test_icl_hub_defaults_0_is_off_for_the_hub_and_for_the_printed_offline_command(monkeypatch):
    """The printed offline command used to carry any non-empty ICL_HUB_DEFAULTS as "set"; it now
    says what the run reads: 0 is off in both."""
    from icl.models import hub
    from icl.run.planning.prefetch import offline_command

    typed = ["python", "-m", "icl.run", "vlicl", "--prefetch"]
    monkeypatch.setenv("ICL_HUB_DEFAULTS", "0")
    assert hub.downloads_allowed() is False
    assert offline_command(typed) == "HF_HUB_OFFLINE=1 python -m icl.run vlicl"
    monkeypatch.setenv("ICL_HUB_DEFAULTS", "yes")
    assert hub.downloads_allowed() is True
    assert offline_command(typed) == "HF_HUB_OFFLINE=1 ICL_HUB_DEFAULTS=1 python -m icl.run vlicl"


@pytest.mark.parametrize("name, text", [("ICL_DOWNLOAD_TIMEOUT", "soon"), ("ICL_HELPERS", "maybe"),
                                        ("ICL_LPIPS_CACHE_MB", "lots")])
def test_the_command_line_says_a_bad_variable_in_one_line_and_exits_2(tmp_path, name, text):
    """Before anything starts: no helper, no model, no item failed one by one (ICL_LPIPS_CACHE_MB
    is first read while scoring)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), name: text}
    done = subprocess.run([sys.executable, "-m", "icl.run", "vibe", "--fast", "--models", "copy-target", "--out",
                           str(tmp_path / "run"), "--no-plots", "--no-progress"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    expected = ENV_NUMBERS[name].expected if name in ENV_NUMBERS else "true/false (or 1/0, yes/no, on/off)"
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"icl.run: {name}={text!r}: expected {expected}"]
    assert not (tmp_path / "run").exists()


def test_python_m_icl_data_says_a_bad_variable_in_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICL_CONVERT_WORKERS": "many"}
    done = subprocess.run([sys.executable, "-m", "icl.data", "convert", "all", str(tmp_path), str(tmp_path / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["convert: ICL_CONVERT_WORKERS='many': expected a positive integer (threads)"]


@pytest.mark.parametrize("env, offline", [({"HF_HUB_OFFLINE": "on"}, True), ({"HF_HUB_OFFLINE": "maybe"}, False),
                                          ({"HF_HUB_OFFLINE": "0"}, False),
                                          ({"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "YES"}, True)])
def test_hugging_face_flags_follow_huggingface_hubs_own_rule_never_an_error(monkeypatch, env, offline):
    from huggingface_hub import constants

    from icl.models import hub

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert hub.offline() is offline
    # the client's own rule, applied to the same text (huggingface_hub.constants._is_true)
    text = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    assert (text.upper() in constants.ENV_VARS_TRUE_VALUES) is offline
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "maybe")
    assert hub.hf_flag("HF_HUB_DISABLE_PROGRESS_BARS") is False
