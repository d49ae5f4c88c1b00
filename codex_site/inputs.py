"""The rules every page and endpoint applies to what a person or a client sends, in one
place: integers from query strings and headers, and texts bound for the database or a
template.

``str.isdigit`` and ``int`` disagree (``"²".isdigit()`` is true, ``int("²")`` raises; ``int``
also takes ``"١٢"``, ``" 1"``, ``"1_000"`` and ``"+1"``), so an integer a client sends is
ASCII digits and nothing else. A text may not hold a lone surrogate (no database can store
one, and UTF-8 cannot encode it for a page) and, unless it is free text, no control
character (Unicode category Cc).
"""

import re

from notebook.validation import CONTROL_CHARACTER, SURROGATE

_ASCII_DIGITS = re.compile(r"[0-9]+")


def ascii_int(value: str | None, *, max_value: int) -> int | None:
    """``value`` as an integer from 0 to ``max_value`` if it is ASCII digits only, else None."""
    if not value or len(value) > len(str(max_value)) or not _ASCII_DIGITS.fullmatch(value):
        return None
    number = int(value)
    return number if number <= max_value else None


def text_problem(value: object, *, max_chars: int, what: str) -> str | None:
    """Why ``value`` is not an acceptable text (a string of at most ``max_chars``
    characters, no lone surrogate, no control character), naming it ``what``; or None."""
    if not isinstance(value, str):
        return f"{what} must be a string"
    if match := SURROGATE.search(value):
        return f"{what} contains an unpaired surrogate (U+{ord(match.group()):04X})"
    if len(value) > max_chars:
        return f"{what} is {len(value)} characters long; the limit is {max_chars}"
    if match := CONTROL_CHARACTER.search(value):
        return f"{what} contains a control character (U+{ord(match.group()):04X})"
    return None
