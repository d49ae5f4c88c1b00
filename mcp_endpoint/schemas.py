"""The tools' JSON Schemas, written once as data.

The tool records in ``mcp_endpoint.tools`` carry these roots; from there they are
what ``tools/list`` serves, what ``tools/call`` arguments are validated against
(with jsonschema), and what ``docs/mcp-tools.json`` is exported from.
Descriptions are built from ``notebook.limits``, so a changed limit changes
the words too. Each ``inputSchema`` and ``outputSchema`` is its own JSON Schema
root: shared parts are copied into each root's ``definitions`` and referenced
locally.

Rules a JSON Schema cannot state exactly (UTF-8 byte limits, control characters,
duplicates, provenance depth and size) are checked by ``notebook.validation`` and
answered with ``invalid_argument``; the schemas carry the character limits.
"""

import copy
from typing import Any

from notebook.limits import (
    CONTENT_MAX_BYTES,
    CURSOR_MAX_CHARS,
    ENTRY_ID_REGEX,
    EXCERPT_CHARS,
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
    thousands,
)

DIALECT = "http://json-schema.org/draft-07/schema#"
TIMESTAMP_REGEX = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


# JSON Schema patterns are ECMA-262 regular expressions, where "$" matches only at the very
# end; Python's re (which jsonschema uses) also lets "$" match before a final newline. The
# fixed lengths close that gap for every validator, and clients see them in the schema.
_ENTRY_ID = {
    "type": "string",
    "minLength": 36,
    "maxLength": 36,
    "pattern": ENTRY_ID_REGEX,
    "description": "Lowercase UUIDv4 of an entry.",
}

_ENTRY_INPUT: dict[str, Any] = {
    "type": "object",
    "description": "A complete entry. Omitted optional fields are absent (never null).",
    "additionalProperties": False,
    "required": ["content"],
    "properties": {
        "content": {
            "type": "string",
            "minLength": 1,
            "maxLength": CONTENT_MAX_BYTES,
            "description": (
                f"The note, 1 to {thousands(CONTENT_MAX_BYTES)} bytes as UTF-8, no U+0000. Stored exactly as given."
            ),
        },
        "title": {
            "type": "string",
            "minLength": 1,
            "maxLength": TITLE_MAX_CHARS,
            "description": (
                f"Optional short title, 1 to {thousands(TITLE_MAX_CHARS)} characters, no control characters."
            ),
        },
        "tags": {
            "type": "array",
            "maxItems": TAGS_MAX_ITEMS,
            "items": {"type": "string", "minLength": 1, "maxLength": TAG_MAX_CHARS},
            "description": (
                f"Up to {thousands(TAGS_MAX_ITEMS)} distinct tags of 1 to {thousands(TAG_MAX_CHARS)} characters, "
                "no control characters; order kept."
            ),
        },
        "relatedAgentIds": {
            "type": "array",
            "maxItems": RELATED_AGENTS_MAX_ITEMS,
            "items": {"type": "string", "minLength": 1, "maxLength": RELATED_AGENT_MAX_CHARS},
            "description": (
                f"Up to {thousands(RELATED_AGENTS_MAX_ITEMS)} distinct identifiers "
                f"(1 to {thousands(RELATED_AGENT_MAX_CHARS)} characters) of agents this note concerns."
            ),
        },
        "provenance": {
            "type": "object",
            "description": (
                "Where the note came from: any JSON object, "
                f"nested at most {thousands(PROVENANCE_MAX_DEPTH)} levels deep, "
                f"at most {thousands(PROVENANCE_MAX_BYTES)} bytes as compact UTF-8 JSON, no U+0000 in any string."
            ),
        },
    },
}

_TIMESTAMP = {
    "type": "string",
    "minLength": 24,
    "maxLength": 24,
    "pattern": TIMESTAMP_REGEX,
    "description": "RFC 3339 UTC, millisecond precision.",
}
_STRINGS = {"type": "array", "items": {"type": "string"}}

_ENTRY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "revision", "content", "tags", "relatedAgentIds", "createdAt", "updatedAt"],
    "properties": {
        "id": {"$ref": "#/definitions/EntryId"},
        "revision": {"type": "integer", "minimum": 1},
        "title": {"type": "string"},
        "content": {"type": "string"},
        "tags": _STRINGS,
        "relatedAgentIds": _STRINGS,
        "provenance": {"type": "object"},
        "createdAt": {"$ref": "#/definitions/Timestamp"},
        "updatedAt": {"$ref": "#/definitions/Timestamp"},
    },
}

_ENTRY_SUMMARY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "revision", "tags", "relatedAgentIds", "createdAt", "updatedAt", "excerpt", "contentBytes"],
    "properties": {
        "id": {"$ref": "#/definitions/EntryId"},
        "revision": {"type": "integer", "minimum": 1},
        "title": {"type": "string"},
        "tags": _STRINGS,
        "relatedAgentIds": _STRINGS,
        "createdAt": {"$ref": "#/definitions/Timestamp"},
        "updatedAt": {"$ref": "#/definitions/Timestamp"},
        "excerpt": {
            "type": "string",
            "description": f"The first (at most) {thousands(EXCERPT_CHARS)} characters of the content.",
        },
        "contentBytes": {"type": "integer", "minimum": 1, "description": "UTF-8 byte length of the content."},
    },
}


def _root(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """A standalone schema root with its own copy of the definitions it uses."""
    root = {"$schema": DIALECT, **copy.deepcopy(schema)}
    if definitions:
        root["definitions"] = copy.deepcopy(definitions)
    return root


SAVE_INPUT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["requestId", "entry"],
        "properties": {
            "requestId": {
                "type": "string",
                "minLength": 1,
                "maxLength": REQUEST_ID_MAX_CHARS,
                "description": (
                    f"Your unique id for this save (1 to {thousands(REQUEST_ID_MAX_CHARS)} characters, "
                    "no control characters)."
                ),
            },
            "entry": {"$ref": "#/definitions/EntryInput"},
        },
    },
    {"EntryInput": _ENTRY_INPUT},
)

GET_INPUT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["id"],
        "properties": {"id": {"$ref": "#/definitions/EntryId"}},
    },
    {"EntryId": _ENTRY_ID},
)

SEARCH_INPUT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": "string",
                "maxLength": QUERY_MAX_CHARS,
                "description": (
                    f"Literal text to find (0 to {thousands(QUERY_MAX_CHARS)} characters); empty filters nothing."
                ),
            },
            "tag": {
                "type": "string",
                "minLength": 1,
                "maxLength": TAG_MAX_CHARS,
                "description": "Only notes with exactly this tag (case-sensitive).",
            },
            "relatedAgentId": {
                "type": "string",
                "minLength": 1,
                "maxLength": RELATED_AGENT_MAX_CHARS,
                "description": "Only notes listing exactly this agent id. Grants no access to that agent.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": SEARCH_LIMIT_MAX,
                "default": SEARCH_LIMIT_DEFAULT,
                "description": (
                    f"Most notes to return on this page (1 to {thousands(SEARCH_LIMIT_MAX)}, "
                    f"default {thousands(SEARCH_LIMIT_DEFAULT)})."
                ),
            },
            "cursor": {
                "type": "string",
                "minLength": 1,
                "maxLength": CURSOR_MAX_CHARS,
                "description": "nextCursor from the previous page; keep query, tag and relatedAgentId unchanged.",
            },
        },
    },
    {},
)

UPDATE_INPUT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "expectedRevision", "entry"],
        "properties": {
            "id": {"$ref": "#/definitions/EntryId"},
            "expectedRevision": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SAFE_INTEGER,
                "description": "The revision you last read.",
            },
            "entry": {"$ref": "#/definitions/EntryInput"},
        },
    },
    {"EntryId": _ENTRY_ID, "EntryInput": _ENTRY_INPUT},
)

ENTRY_RESULT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["entry"],
        "properties": {"entry": {"$ref": "#/definitions/Entry"}},
    },
    {"Entry": _ENTRY, "EntryId": _ENTRY_ID, "Timestamp": _TIMESTAMP},
)

SEARCH_RESULT = _root(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["entries", "coverage"],
        "properties": {
            "entries": {"type": "array", "items": {"$ref": "#/definitions/EntrySummary"}},
            "nextCursor": {"type": "string"},
            "coverage": {
                "type": "object",
                "additionalProperties": False,
                "required": ["storage", "mode", "scanned", "hasMore"],
                "properties": {
                    "storage": {"const": "active-only"},
                    "mode": {"const": "literal-substring-v1"},
                    "scanned": {"type": "integer", "minimum": 0},
                    "hasMore": {"type": "boolean"},
                },
            },
        },
    },
    {"EntrySummary": _ENTRY_SUMMARY, "EntryId": _ENTRY_ID, "Timestamp": _TIMESTAMP},
)
