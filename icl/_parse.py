"""The one boolean parser of every flag, TOML key, benchmark option and model argument."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")


def parse_bool(value: Any, name: str = "value") -> bool:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case), a bool, or the integers 1/0;
    anything else is a ValueError naming ``name`` (a TOML ``plots = "false"`` is False, not a
    non-empty string read as True)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE:
            return True
        if text in FALSE:
            return False
    raise ValueError(f"{name}: expected true/false (or 1/0, yes/no), got {value!r}")


# --- environment variables -------------------------------------------------------------------
# Every ICL_* variable is declared below and read through env_bool / env_number, so a bad value is
# the same one line wherever it is read, and check_environment() refuses it before a command
# starts (a value read first in a scoring thread would otherwise fail every item, one by one).
# The defaults stay with the code that uses them. Hugging Face's own variables follow
# huggingface_hub's rule instead (icl.models.hub.hf_flag), never this one.

class EnvError(ValueError):
    """An environment variable's value is not what it must be: ``NAME='value': expected ...``."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"{name}={value!r}: expected {expected}")

    def __reduce__(self) -> tuple[Any, ...]:  # a helper process hands it back as itself
        return type(self), (self.name, self.value, self.expected)


@dataclass(frozen=True)
class NumberRule:
    """What a numeric variable accepts: a ``kind`` (int or float, finite) ``>= minimum`` and
    ``> above`` (each when given); ``unit`` says what it counts."""

    kind: type = int
    minimum: Optional[float] = None
    above: Optional[float] = None
    unit: str = ""

    @property
    def expected(self) -> str:
        if self.kind is int and self.minimum == 1 and self.above is None:
            text = "a positive integer"
        else:
            bounds = [f"{sign} {bound:g}" for sign, bound in ((">=", self.minimum), (">", self.above))
                      if bound is not None]
            text = " ".join(["an integer" if self.kind is int else "a finite number", " and ".join(bounds)]).strip()
        return f"{text} ({self.unit})" if self.unit else text


_SECONDS = NumberRule(float, above=0, unit="seconds")
_BYTES = NumberRule(int, minimum=1, unit="bytes")

#: the boolean ICL_* variables (docs/runs.md, "Environment variables")
ENV_BOOLEANS = frozenset({"ICL_HELPERS", "ICL_STRICT_BACKEND", "ICL_HUB_DEFAULTS"})
#: the numeric ICL_* variables and what each accepts
ENV_NUMBERS: dict[str, NumberRule] = {
    "ICL_HELPER_SILENCE_S": _SECONDS, "ICL_HELPER_DEADLINE_S": _SECONDS, "ICL_WORKER_SILENCE_S": _SECONDS,
    "ICL_LPIPS_CACHE_MB": NumberRule(int, minimum=0, unit="MiB"),
    "ICL_DOWNLOAD_MIN_RATE": NumberRule(float, minimum=0, unit="bytes/s"),
    "ICL_DOWNLOAD_WINDOW": _SECONDS,
    "ICL_DOWNLOAD_TIMEOUT": NumberRule(float, minimum=0, unit="seconds, 0: no limit"),
    "ICL_DOWNLOAD_TRIES": NumberRule(int, minimum=1),
    "ICL_CONVERT_MAX_ARRAY_BYTES": _BYTES, "ICL_CONVERT_WORKERS": NumberRule(int, minimum=1, unit="threads"),
    "ICL_MAX_IMAGE_PIXELS": NumberRule(int, minimum=1, unit="pixels"),
    "ICL_FETCH_MAX_UNPACK": _BYTES, "ICL_FETCH_MAX_MEMBER": _BYTES,
    "ICL_FETCH_MAX_RATIO": NumberRule(int, minimum=1),
}


def _env_text(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_bool(name: str, default: bool = False) -> bool:
    """Boolean variable ``name`` (one of :data:`ENV_BOOLEANS`) read by :func:`parse_bool`; unset
    or blank is ``default``; anything :func:`parse_bool` refuses is an :class:`EnvError`."""
    if name not in ENV_BOOLEANS:
        raise KeyError(f"{name} is not declared in icl._parse.ENV_BOOLEANS")
    text = _env_text(name)
    if not text:
        return default
    try:
        return parse_bool(text, name)
    except ValueError:
        raise EnvError(name, text, "true/false (or 1/0, yes/no, on/off)") from None


def env_number(name: str, default: Any) -> Any:
    """Numeric variable ``name`` (one of :data:`ENV_NUMBERS`, whose rule it must meet); unset or
    blank is ``default``. Anything else, NaN and infinity included, is an :class:`EnvError`."""
    rule = ENV_NUMBERS[name]
    text = _env_text(name)
    if not text:
        return default
    try:
        value = rule.kind(text)
    except ValueError:
        raise EnvError(name, text, rule.expected) from None
    if value != value or value in (float("inf"), float("-inf")) or (rule.minimum is not None and value < rule.minimum) \
            or (rule.above is not None and not value > rule.above):
        raise EnvError(name, text, rule.expected)
    return value


def check_environment() -> None:
    """Read every declared ICL_* variable that is set: the first bad one is an :class:`EnvError`
    (a command calls this before it starts anything)."""
    for name in sorted(ENV_BOOLEANS):
        env_bool(name)
    for name in ENV_NUMBERS:
        env_number(name, None)
