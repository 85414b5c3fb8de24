"""The one boolean parser of every flag, TOML key, benchmark option and model argument."""

from __future__ import annotations

from typing import Any

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
