"""The rules every page and endpoint applies to what a person or a client sends, in one
place: integers from query strings and headers, bearer credentials, JSON from strangers, texts bound for the
database, a template or a terminal, and names. Below every app (``notebook.validation`` reads
its text rule from here too).

``str.isdigit`` and ``int`` disagree (``"²".isdigit()`` is true, ``int("²")`` raises; ``int``
also takes ``"١٢"``, ``" 1"``, ``"1_000"`` and ``"+1"``), so an integer a client sends is
ASCII digits and nothing else. A text may not hold a lone surrogate (no database can store
one, and UTF-8 cannot encode it for a page) and, unless it is free text, no control
character (Unicode category Cc).

**JSON a stranger sent** (a request body, a fetched document or key set, a pasted key set, an
export file, a sign-in provider's answer) is read by ``json_document`` alone: the parser the MCP
SDK reads its messages with (``pydantic_core.from_json``), so that every door agrees on what is
JSON, and it never turns a document into a Python fault. ``json.loads`` raises
``RecursionError`` on deep nesting, lets a ``\\u`` escape of a lone surrogate through (a string
no database or page can hold) and reads ``NaN`` and ``Infinity``; here each is a
``JSONRefused`` with words.

**A name** (an application's display name, a headless agent's, a writer's: what Connected
applications, the consent page, "written by" and exports show) is a text that shows itself:
``name_problem`` also refuses the characters that change how the text around them is shown
instead (``NAME_REFUSED_CATEGORIES``: format characters such as U+202E RIGHT-TO-LEFT OVERRIDE,
which makes a name read backwards, and the line and paragraph separators), except the two
joiners words and emoji need. Every door that takes a name calls it, so that a name one door
accepts every door accepts: an export names its writers as they were recorded, and its import
refuses what this rule refuses (``name_cleaned`` writes a name recorded before this rule held
as the rule accepts it).
"""

import math
import re
import unicodedata
from typing import Any

from pydantic_core import from_json

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


def bearer_credential(authorization: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header (the scheme in any
    case, RFC 9110 §11.1; the credential without the spaces around it), or None: every door that
    takes a bearer credential (/mcp, SCIM, /metrics) reads it here, and never from the query."""
    scheme, _, credential = (authorization or "").partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        return None
    return credential


def text_problem(value: object, *, max_chars: int | None, what: str, controls: bool = False) -> str | None:
    """Why ``value`` is not an acceptable text (a string of at most ``max_chars`` characters,
    no lone surrogate, no control character unless ``controls``: free text), naming it
    ``what``; or None."""
    if not isinstance(value, str):
        return f"{what} must be a string"
    if match := SURROGATE.search(value):
        return f"{what} contains an unpaired surrogate (U+{ord(match.group()):04X}); send valid Unicode"
    if max_chars is not None and len(value) > max_chars:
        return f"{what} is {len(value)} characters long; the limit is {max_chars}"
    if not controls and (match := CONTROL_CHARACTER.search(value)):
        return f"{what} contains a control character (U+{ord(match.group()):04X})"
    return None


# --- names --------------------------------------------------------------------------------------

# Besides control characters (Cc) and lone surrogates (Cs), which text_problem refuses: format
# characters (the bidirectional overrides and isolates, zero-width spaces, the byte order mark,
# tags) and the line and paragraph separators. Each is not shown itself and changes how what
# is around it is shown: a name that reads backwards, looks like another, or breaks a line.
# Space separators (Zs: the no-break space, the ideographic space, ...) are accepted: each
# shows as the space it is, people's and applications' names hold them (a no-break space
# before a colon in French, U+3000 in Japanese), and Dynamic Client Registration has always
# accepted them, so names already recorded hold them.
NAME_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Format characters a name needs: ZERO WIDTH NON-JOINER and ZERO WIDTH JOINER shape the words
# of Persian and Indic scripts and join emoji sequences; neither reorders nor breaks a line.
NAME_JOINERS = frozenset({"\u200c", "\u200d"})
REPLACEMENT_CHARACTER = "\ufffd"


def _refused_in_name(character: str) -> bool:
    return unicodedata.category(character) in NAME_REFUSED_CATEGORIES and character not in NAME_JOINERS


def name_problem(value: object, *, max_chars: int, what: str) -> str | None:
    """Why ``value`` is not an acceptable name (a text, ``text_problem``, with no character the
    rule refuses, ``NAME_REFUSED_CATEGORIES``), naming it ``what``; or None."""
    if problem := text_problem(value, max_chars=max_chars, what=what):
        return problem
    name = str(value)  # (it is one: text_problem refused anything else)
    if name.isprintable():  # no refused character is printable: the common case, at C speed
        return None
    for character in name:
        if _refused_in_name(character):
            named = unicodedata.name(character, "")
            return (
                f"{what} contains a character that is not shown but changes how the text around it is shown "
                f"(U+{ord(character):04X}{' ' + named if named else ''})"
            )
    return None


def name_cleaned(value: str) -> str:
    """``value`` as the name rule accepts it (length aside): each character it refuses written as
    U+FFFD REPLACEMENT CHARACTER. For names recorded before the rule held."""
    if value.isprintable():
        return value
    return "".join(REPLACEMENT_CHARACTER if _refused_in_name(character) else character for character in value)


# --- JSON a stranger sent -----------------------------------------------------------------------


class JSONRefused(ValueError):
    """JSON this server will not read. ``problem`` says why, as a clause about "it" (the
    document), for each door to put in its own words."""

    code = "invalid_json"

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _non_finite(value: Any) -> bool:
    """Whether a parsed document holds a float that is not finite: the parser reads a number too
    large for a double (``1e400``) as infinity. One pass over its values, by exact type (the
    parser makes only these)."""
    pending = [value]
    pop, extend, isfinite = pending.pop, pending.extend, math.isfinite
    while pending:
        item = pop()
        kind = type(item)
        if kind is float:
            if not isfinite(item):
                return True
        elif kind is dict:
            extend(item.values())
        elif kind is list:
            extend(item)
    return False


def json_document(raw: bytes | bytearray | str, *, must_be_object: bool = False) -> Any:
    """``raw`` (UTF-8 bytes, or a text) parsed as JSON, or ``JSONRefused`` saying why not: it is
    not JSON in UTF-8 (a lone surrogate, escaped or not, in a string or a key, included), it is
    nested past the parser's recursion limit (about 200 arrays and objects inside one another),
    it holds ``NaN`` or ``Infinity`` or a number too large to be finite, or (``must_be_object``)
    it is not an object. Never raises anything else."""
    if isinstance(raw, str):
        try:
            raw = raw.encode("utf-8")
        except UnicodeEncodeError as error:
            surrogate = ord(raw[error.start])
            raise JSONRefused(f"it is not JSON: it holds an unpaired surrogate (U+{surrogate:04X})") from None
    try:
        document = from_json(raw, allow_inf_nan=False)
    except ValueError as error:
        # The parser's one word for nesting past its limit (where json.loads raises RecursionError).
        if "recursion limit" in str(error):
            raise JSONRefused(
                "it is nested too deeply: more than about 200 arrays and objects inside one another"
            ) from None
        raise JSONRefused(f"it is not JSON ({shown(str(error), max_chars=200)})") from None
    if _non_finite(document):
        raise JSONRefused("it holds a number too large to be finite")
    if must_be_object and not isinstance(document, dict):
        raise JSONRefused("it is not a JSON object")
    return document


def shown(value: object, *, max_chars: int = 100) -> str:
    """``value`` made safe to show on a page or a terminal (neither can encode a lone
    surrogate): surrogates and control characters written as escapes, cut to ``max_chars``."""
    text = value if isinstance(value, str) else ""
    text = SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    text = CONTROL_CHARACTER.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
