"""The rules every page and endpoint applies to what a person or a client sends, in one
place: integers from query strings and headers, and texts bound for the database, a
template or a terminal. Below every app (``notebook.validation`` reads its character
classes from here too).

``str.isdigit`` and ``int`` disagree (``"²".isdigit()`` is true, ``int("²")`` raises; ``int``
also takes ``"١٢"``, ``" 1"``, ``"1_000"`` and ``"+1"``), so an integer a client sends is
ASCII digits and nothing else. A text may not hold a lone surrogate (no database can store
one, and UTF-8 cannot encode it for a page) and, unless it is free text, no control
character (Unicode category Cc).
"""

import re

_ASCII_DIGITS = re.compile(r"[0-9]+")
# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F.
CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")
SURROGATE = re.compile("[\ud800-\udfff]")


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


def shown(value: object, *, max_chars: int = 100) -> str:
    """``value`` made safe to show on a page or a terminal (neither can encode a lone
    surrogate): surrogates and control characters written as escapes, cut to ``max_chars``."""
    text = value if isinstance(value, str) else ""
    text = SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    text = CONTROL_CHARACTER.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
