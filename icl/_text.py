"""The one check of text received from outside (model answers, release JSON and CSV, names):
is it valid Unicode?

Python's ``json`` decodes the legal escape ``"\\ud800"`` to a lone surrogate, and a path or
argument of bytes that are not UTF-8 arrives as lone surrogates too (``surrogateescape``). Such a
string cannot be written to a UTF-8 file, a JSON document or SQLite. Each boundary that takes
text checks it here once and fails only the item (answer, record, file, argument) that holds it,
naming where.
"""

from __future__ import annotations

from typing import Any, Optional


def unicode_problem(text: str) -> str:
    """Why ``text`` is not valid Unicode (``"not valid Unicode: a lone surrogate U+D800 at
    character 3"``), or "" when it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode: a lone surrogate U+{ord(text[exc.start]):04X} at character {exc.start}"
    return ""


def bad_text(value: Any, path: str = "") -> Optional[tuple[str, str]]:
    """The first string (a key or a value) of parsed JSON ``value`` that is not valid Unicode:
    ``(where, why)`` with ``where`` as ``field 'a'[2]['b']`` relative to ``value`` (``key of
    ...`` for a key); None when every string is valid."""
    if isinstance(value, str):
        why = unicode_problem(value)
        return (path or "value", why) if why else None
    if isinstance(value, dict):
        for k, v in value.items():
            inner = f"{path}[{_shown(k)}]" if path else f"field {_shown(k)}"
            if isinstance(k, str) and unicode_problem(k):
                return (f"a key of {path or 'the object'} ({_shown(k)})", unicode_problem(k))
            found = bad_text(v, inner)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = bad_text(v, f"{path}[{i}]" if path else f"element {i}")
            if found:
                return found
    return None


def _shown(key: Any) -> str:
    """``repr`` of a key with lone surrogates kept as escapes (printable and encodable)."""
    return ascii(key) if isinstance(key, str) and unicode_problem(key) else repr(key)
