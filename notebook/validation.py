"""Every rule of contract section 3 (and the argument rules of section 5), checked
in Python so that the notebook is safe to call without the MCP layer in front.

The MCP layer validates the JSON Schema first (a violation is ``invalid_argument`` too,
naming the path); what reaches these functions and still breaks a rule is ``invalid_argument``.
The checks are complete on their own (types included) because services are also
called from tests, the shell and future adapters.
"""

import hashlib
import json
import math
import re
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any

from common.inputs import SURROGATE, text_problem
from notebook.exceptions import InvalidArgument
from notebook.limits import (
    CONTENT_MAX_BYTES,
    CURSOR_MAX_CHARS,
    ENTRY_ID_REGEX,
    MAX_SAFE_INTEGER,
    PROVENANCE_MAX_BYTES,
    PROVENANCE_MAX_DEPTH,
    QUERY_MAX_CHARS,
    RELATED_AGENT_MAX_CHARS,
    RELATED_AGENTS_MAX_ITEMS,
    REQUEST_ID_MAX_CHARS,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    TAG_MAX_CHARS,
    TAGS_MAX_ITEMS,
    TITLE_MAX_CHARS,
)

ENTRY_FIELDS = frozenset({"content", "title", "tags", "relatedAgentIds", "provenance"})
ENTRY_ID_PATTERN = re.compile(ENTRY_ID_REGEX)


@dataclass(frozen=True)
class EntryInput:
    """A validated ``entry`` argument. ``fingerprint`` identifies the input as sent."""

    content: str
    title: str | None
    tags: tuple[str, ...]
    related_agent_ids: tuple[str, ...]
    provenance: dict[str, Any] | None
    fingerprint: str


def normalize_for_search(text: str) -> str:
    """The form both the query and the searched text are compared in (contract 5)."""
    return unicodedata.normalize("NFKC", text).casefold()


def canonical_json(value: Any) -> str:
    """Keys sorted, no insignificant whitespace, non-ASCII kept as is; array order kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint_of(raw_entry: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(raw_entry).encode("utf-8")).hexdigest()


def _string(value: Any, path: str, *, min_chars: int = 1, max_chars: int | None = None, controls: bool) -> str:
    """Check a string by the text rule of every door (``common.inputs.text_problem``: its type,
    Unicode well-formedness, length in characters and, unless ``controls``, absence of control
    characters), and that it is not shorter than ``min_chars``. The limits are the contract's
    (section 3, ``notebook.limits``) and stay here: only the rule's characters are shared."""
    if problem := text_problem(value, max_chars=max_chars, what=path, controls=controls):
        raise InvalidArgument(problem)
    if len(value) < min_chars:
        raise InvalidArgument(f"{path} must not be empty" if min_chars == 1 else f"{path} is too short")
    return value


def _string_list(value: Any, path: str, *, max_items: int, max_chars: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidArgument(f"{path} must be an array of strings")
    if len(value) > max_items:
        raise InvalidArgument(f"{path} has {len(value)} items; the limit is {max_items}")
    seen: set[str] = set()
    for index, item in enumerate(value):
        _string(item, f"{path}[{index}]", max_chars=max_chars, controls=False)
        if item in seen:
            raise InvalidArgument(f"{path}[{index}] repeats {item!r}; each value may appear once")
        seen.add(item)
    return tuple(value)


def _check_provenance_tree(value: Any, path: str, depth: int) -> None:
    """Walk the provenance tree: depth counts objects and arrays (the root object is 1).

    Its texts are free JSON (contract 3), not ``text_problem``'s texts on purpose: any control
    character but U+0000 (which PostgreSQL's jsonb cannot store) is kept, and no length applies
    but the provenance's bytes."""
    if isinstance(value, dict | list):
        if depth > PROVENANCE_MAX_DEPTH:
            raise InvalidArgument(f"entry.provenance is nested deeper than {PROVENANCE_MAX_DEPTH} levels at {path}")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidArgument(f"{path} has a non-string key")
                if "\x00" in key:
                    raise InvalidArgument(f"{path} has a key containing U+0000")
                if SURROGATE.search(key):
                    raise InvalidArgument(f"{path} has a key containing an unpaired surrogate")
                _check_provenance_tree(item, f"{path}.{key}", depth + 1)
        else:
            for index, item in enumerate(value):
                _check_provenance_tree(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, str):
        if "\x00" in value:
            raise InvalidArgument(f"{path} contains U+0000, which cannot be stored")
        if SURROGATE.search(value):
            raise InvalidArgument(f"{path} contains an unpaired surrogate; send valid Unicode")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{path} is not a finite number")
    elif value is not None and not isinstance(value, bool | int):
        raise InvalidArgument(f"{path} is not a JSON value")


def parse_entry_input(value: Any) -> EntryInput:
    """Validate an ``entry`` argument of save or update against contract section 3."""
    if not isinstance(value, dict):
        raise InvalidArgument("entry must be an object")
    unknown = sorted(set(value) - ENTRY_FIELDS, key=str)
    if unknown:
        raise InvalidArgument(f"entry has unknown member {unknown[0]!r}")
    if "content" not in value:
        raise InvalidArgument("entry.content is required")
    for name in ENTRY_FIELDS - {"content"}:
        if name in value and value[name] is None:
            raise InvalidArgument(f"entry.{name} must be omitted rather than null")

    content = _string(value["content"], "entry.content", controls=True)
    if "\x00" in content:
        raise InvalidArgument("entry.content contains U+0000, which cannot be stored")
    content_bytes = len(content.encode("utf-8"))
    if content_bytes > CONTENT_MAX_BYTES:
        raise InvalidArgument(f"entry.content is {content_bytes} bytes as UTF-8; the limit is {CONTENT_MAX_BYTES}")

    title = None
    if "title" in value:
        title = _string(value["title"], "entry.title", max_chars=TITLE_MAX_CHARS, controls=False)

    tags = _string_list(value.get("tags", []), "entry.tags", max_items=TAGS_MAX_ITEMS, max_chars=TAG_MAX_CHARS)
    related = _string_list(
        value.get("relatedAgentIds", []),
        "entry.relatedAgentIds",
        max_items=RELATED_AGENTS_MAX_ITEMS,
        max_chars=RELATED_AGENT_MAX_CHARS,
    )

    provenance = None
    if "provenance" in value:
        provenance = value["provenance"]
        if not isinstance(provenance, dict):
            raise InvalidArgument("entry.provenance must be an object")
        _check_provenance_tree(provenance, "entry.provenance", 1)
        size = len(json.dumps(provenance, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > PROVENANCE_MAX_BYTES:
            raise InvalidArgument(
                f"entry.provenance is {size} bytes as compact UTF-8 JSON; the limit is {PROVENANCE_MAX_BYTES}"
            )

    return EntryInput(
        content=content,
        title=title,
        tags=tags,
        related_agent_ids=related,
        provenance=provenance,
        fingerprint=fingerprint_of(value),
    )


def parse_request_id(value: Any) -> str:
    return _string(value, "requestId", max_chars=REQUEST_ID_MAX_CHARS, controls=False)


def parse_entry_id(value: Any) -> uuid.UUID:
    # fullmatch, not match: "$" alone would also accept a trailing newline.
    if not isinstance(value, str) or not ENTRY_ID_PATTERN.fullmatch(value):
        raise InvalidArgument("id must be a lowercase UUIDv4 such as 11111111-1111-4111-8111-111111111111")
    return uuid.UUID(value)


def parse_expected_revision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAFE_INTEGER:
        raise InvalidArgument(f"expectedRevision must be an integer from 1 to {MAX_SAFE_INTEGER}")
    return value


@dataclass(frozen=True)
class SearchParams:
    """Validated search arguments. ``query`` is '' when absent; filters are None when absent."""

    query: str
    tag: str | None
    related_agent_id: str | None
    limit: int
    cursor: str | None
    # Not a tool argument: the person's pages narrow to entries an application (by client
    # id) wrote a revision of. The tools never set it, so their cursors are unchanged.
    written_by: str | None = None

    @property
    def filtered(self) -> bool:
        return (
            bool(self.query) or self.tag is not None or self.related_agent_id is not None or self.written_by is not None
        )


def parse_search_params(
    *,
    query: Any = None,
    tag: Any = None,
    related_agent_id: Any = None,
    limit: Any = None,
    cursor: Any = None,
) -> SearchParams:
    """Validate search arguments (contract 5). ``None`` means the argument was omitted."""
    if query is not None:
        _string(query, "query", min_chars=0, max_chars=QUERY_MAX_CHARS, controls=True)
    if tag is not None:
        _string(tag, "tag", max_chars=TAG_MAX_CHARS, controls=True)
    if related_agent_id is not None:
        _string(related_agent_id, "relatedAgentId", max_chars=RELATED_AGENT_MAX_CHARS, controls=True)
    if limit is None:
        limit = SEARCH_LIMIT_DEFAULT
    elif isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= SEARCH_LIMIT_MAX:
        raise InvalidArgument(f"limit must be an integer from 1 to {SEARCH_LIMIT_MAX}")
    if cursor is not None:
        _string(cursor, "cursor", max_chars=CURSOR_MAX_CHARS, controls=True)
    return SearchParams(query=query or "", tag=tag, related_agent_id=related_agent_id, limit=limit, cursor=cursor)
