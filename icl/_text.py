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
    ``(where, why)``, ``where`` the path to it from ``value`` (``question``, ``image[1]``,
    ``support.cat.images[0]``; a key: the path of its object, ``key <key>`` appended); None when
    every string is valid."""
    if isinstance(value, str):
        why = unicode_problem(value)
        return (path, why) if why else None
    if isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            if unicode_problem(key):
                return (f"{path} key {ascii(key)}".strip(), unicode_problem(key))
            found = bad_text(v, f"{path}.{key}" if path else key)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = bad_text(v, f"{path}[{i}]")
            if found:
                return found
    return None
