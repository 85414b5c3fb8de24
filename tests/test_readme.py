"""Every ``python -m icl.run vlicl`` and ``best50`` command the README shows runs as written and
exits 0 (issue 19), with the README's placeholders (weight folders, the release folder, the
package, the server address) replaced by real local stand-ins: a tiny LLaVA checkpoint built
with the official transformers classes (``icl.models.vlm.tiny``), a fabricated copy of
the published VL-ICL layout (``tests/benchmarks/vlicl/conftest.py``), a best50 package in the
format of its README and an OpenAI-compatible server on 127.0.0.1 (``vlm_chat_server.py``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_commands(benchmark: str) -> list[str]:
    """The README's ``python -m icl.run BENCHMARK ...`` lines (comments stripped), in order, with
    the ``python -m icl.run merge ...`` lines of the same block (they merge its shard runs)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        mine = False
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd.startswith(f"python -m icl.run {benchmark} "):
                out.append(cmd)
                mine = True
            elif mine and cmd.startswith("python -m icl.run merge "):
                out.append(cmd)
    return out


def test_the_readme_shows_the_commands_this_file_runs():
    assert len(readme_commands("vlicl")) >= 3 and len(readme_commands("best50")) >= 3
    assert any(c.startswith("python -m icl.run merge ") for c in readme_commands("best50"))


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """Placeholders of the README -> local stand-ins, and the OpenAI-compatible server."""
    from icl.benchmarks.best50.synthetic import write_package
    from icl.models.vlm.hf import HFVisionLanguage
    from tests.benchmarks.vlicl.conftest import make_release
    from icl.models.vlm.tiny import build_llava
    from tests.models.vlm.vlm_chat_server import ChatServer

    base = tmp_path_factory.mktemp("readme")
    tiny = build_llava(base / "tiny-llava", max_positions=2048)
    release = make_release(base / "VL-ICL")
    package = write_package(base / "PKG", n_per_class=1, classes=("car", "dog"), ks=(1, 2))
    preds = base / "preds.jsonl"
    with open(preds, "w") as f:
        for path in sorted((package / "inputs").glob("inputs_k*.jsonl")):
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                f.write(json.dumps({k: rec[k] for k in ("k", "sample_id", "class", "query_gt_boxes_pixel",
                                                      "query_image_size")}
                                   | {"response": "<bbox_start><x10><y10><x500><y500><bbox_end>"}) + "\n")
    model = HFVisionLanguage(weights=str(tiny))
    model.load("cpu")
    with ChatServer(model, lifetime_s=600) as server:
        yield {"/w/llava-1.5-7b-hf": str(tiny), "/w/qwen2-vl-7b": str(tiny), "/w/judge": str(tiny), "/w/qwen2.5-vl": str(tiny),
               "/data/VL-ICL": str(release), "http://127.0.0.1:8000/v1": server.base_url,
               "PKG": str(package), "preds.jsonl": str(preds)}


def _substitute(cmd: str, stand_ins: dict) -> list[str]:
    words = shlex.split(cmd)
    out = []
    for w in words:
        for key, value in stand_ins.items():
            w = value if w == key else w.replace(key, value) if key.startswith(("/", "http")) else w
        out.append(w)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["vlicl", "best50"])
def test_readme_commands_run_as_written(bench, stand_ins, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MY_KEY": "sk-readme-test", "ICL_DATA_ROOT": str(tmp_path / "d")}
    for cmd in readme_commands(bench):
        argv = _substitute(cmd, stand_ins)
        assert argv[:3] == ["python", "-m", "icl.run"]
        common = [] if argv[3] == "merge" else ["--no-progress", "--device", "cpu"]
        proc = subprocess.run([sys.executable, *argv[1:], *common], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-3000:]}"
        assert "items computed" in proc.stdout, cmd


# README lines that cannot run as written here, and why (every other line runs below or above)
NEEDS_WHAT_CI_LACKS = {
    "python -m icl.run vibe --models painter:weights=/w/painter.pth,dtype=bf16,copy-target --shots 1,3":
        "Painter's official weights (never downloaded) and converted datasets",
    "python -m icl.run vibe --models my-model --model-arg my-model:temperature=0.5": "the user's own plugin model",
    "python -m icl.run vibe --config run.toml --device cuda": "a GPU and the user's run.toml",
    "python -m icl.run vibe --tasks segmentation,depth --models oracle,my-model --shots 1,3 --limit 50":
        "converted datasets and the user's own plugin model",
    "python -m icl.run vibe --device cuda --dtype bf16": "a GPU and converted datasets",
}


def _all_commands() -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd.startswith("python -m icl.run") and cmd not in out:
                out.append(cmd)
    return out


@pytest.mark.slow
def test_every_other_readme_command_runs_as_written(tmp_path):
    """Every ``python -m icl.run`` line of the README that neither the vlicl/best50 test above
    runs (with stand-ins) nor :data:`NEEDS_WHAT_CI_LACKS` names runs as written in a fresh
    folder and exits 0; ``rescore runs/vibe`` rescoring the run a first vibe command left there."""
    covered = set(readme_commands("vlicl")) | set(readme_commands("best50"))
    commands = [c for c in _all_commands() if c not in covered and c not in NEEDS_WHAT_CI_LACKS]
    assert set(NEEDS_WHAT_CI_LACKS) <= set(_all_commands()), "NEEDS_WHAT_CI_LACKS names a line the README lost"
    assert any(c.startswith("python -m icl.run rescore") for c in commands)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICL_DATA_ROOT": str(tmp_path / "d")}

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)

    # the run `rescore runs/vibe` reads: a vibe run in runs/vibe (the default folder of a real vibe run)
    setup = run(["-m", "icl.run", "vibe", "--fast", "--out", "runs/vibe", "--no-progress", "--no-plots"])
    assert setup.returncode == 0, setup.stderr[-3000:]
    for cmd in commands:
        proc = run(shlex.split(cmd)[1:])
        assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
        assert proc.stdout.strip(), cmd


# --- --check of every README command line (issue 38) ------------------------------------------
NOT_A_RUN = ("python -m icl.run rescore ", "python -m icl.run merge ", "python -m icl.run export ")
NOT_A_RUN_FLAGS = {"--list", "--help", "-h", "--version"}
# the lines NEEDS_WHAT_CI_LACKS names: what their --check reports missing (exit 2, or a usage error)
CHECK_FINDS_MISSING = {
    "python -m icl.run vibe --models painter:weights=/w/painter.pth,dtype=bf16,copy-target --shots 1,3":
        "/w/painter.pth",
    "python -m icl.run vibe --models my-model --model-arg my-model:temperature=0.5": "my-model",
    "python -m icl.run vibe --config run.toml --device cuda": "run.toml",
    "python -m icl.run vibe --tasks segmentation,depth --models oracle,my-model --shots 1,3 --limit 50":
        "my-model",
    "python -m icl.run vibe --device cuda --dtype bf16": "no converted vibe dataset",
}


def check_commands() -> list[str]:
    """The README's run command lines (not rescore / merge / export, nor --list / --help)."""
    return [c for c in _all_commands() if not c.startswith(NOT_A_RUN) and not NOT_A_RUN_FLAGS & set(shlex.split(c))]


@pytest.mark.slow
def test_check_of_every_readme_command(stand_ins, tmp_path, monkeypatch, capsys):
    """``--check`` of every README run command (the stand-ins of the tests above in place of its
    placeholders) exits 0 in seconds, writing nothing but check.json; each line
    :data:`NEEDS_WHAT_CI_LACKS` names exits 2 (or a usage error, 2) naming what it lacks."""
    from icl.run.__main__ import main

    commands = check_commands()
    assert len(commands) >= 12 and set(CHECK_FINDS_MISSING) <= set(NEEDS_WHAT_CI_LACKS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICL_DATA_ROOT", str(tmp_path / "d"))
    monkeypatch.setenv("MY_KEY", "sk-readme-test")
    slow = []
    for cmd in commands:
        argv = _substitute(cmd, stand_ins)[3:]
        extra = ["--check", "--no-progress"] if "--check" not in argv else ["--no-progress"]
        t0 = time.perf_counter()
        code = main([*argv, *extra])
        elapsed = time.perf_counter() - t0
        printed = capsys.readouterr()
        if cmd in NEEDS_WHAT_CI_LACKS:
            if cmd in CHECK_FINDS_MISSING:
                assert code == 2 and CHECK_FINDS_MISSING[cmd] in printed.out + printed.err, f"{cmd}\n{printed}"
            continue
        assert code == 0, f"{cmd}\n{printed.out[-3000:]}\n{printed.err[-3000:]}"
        assert "runnable (exit 0)" in printed.out, cmd
        slow += [(cmd, elapsed)] if elapsed > 30 else []
    assert not slow, slow


@pytest.mark.slow
def test_the_readme_viewer_line_runs_as_written(tmp_path):
    """The set-up block's ``.venv/bin/python -m icl.run view`` (after ``make run``: browse runs/ at
    http://127.0.0.1:8765): run as written from a folder holding runs/ (this interpreter standing
    for .venv/bin/python), it serves the URL the README names, and the runs page answers."""
    import urllib.request

    (line,) = [raw.split("  #", 1)[0].strip() for raw in README.read_text().splitlines()
               if raw.startswith(".venv/bin/python -m icl.run view")]
    argv = [sys.executable, *line.split()[1:]]
    (tmp_path / "runs").mkdir()
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        first = proc.stdout.readline()
        assert "http://127.0.0.1:8765/" in first, first
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:8765/", timeout=5) as page:
                    assert page.status == 200 and "Runs" in page.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
