"""The rules the published schemas of server.json and the server card state, for the members
this server writes, as JSON Schemas of our own (no network in tests; the published files are
not copied here).

- ``SERVER_JSON``: the MCP Registry's server.json, schema 2025-12-11
  (https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json; its source is
  docs/reference/server-json/ in modelcontextprotocol/registry), with the registry's publishing
  rules its descriptions state (an icon's ``src`` is an HTTPS URL).
- ``SERVER_CARD``: the experimental server card, v1 (schema.json of
  modelcontextprotocol/experimental-ext-server-card, generated from its schema.ts; the
  extension is a draft, and its ``$schema`` URL is not yet published).

Where a rule is the same in both (name, description, version, title, icons), it is written once.
"""

from typing import Any

NAME = {"type": "string", "minLength": 3, "maxLength": 200, "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$"}
DESCRIPTION = {"type": "string", "minLength": 1, "maxLength": 100}
TITLE = {"type": "string", "minLength": 1, "maxLength": 100}
# "Version ranges are rejected (e.g., '^1.2.3', '~1.2.3', '>=1.2.3', '1.x', '1.*')."
VERSION = {
    "type": "string",
    "maxLength": 255,
    "pattern": r"^[0-9A-Za-z.+-]+$",
    "not": {"pattern": r"(^|\.)[xX*](\.|$)"},
}
ICON = {
    "type": "object",
    "required": ["src"],
    "properties": {
        "src": {"type": "string", "format": "uri"},
        "mimeType": {"type": "string"},
        "sizes": {"type": "array", "items": {"type": "string", "pattern": r"^(\d+x\d+|any)$"}},
        "theme": {"enum": ["light", "dark"]},
    },
}
REGISTRY_ICON = {
    "allOf": [ICON],
    "properties": {
        "src": {"type": "string", "maxLength": 255, "pattern": r"^https://"},
        "mimeType": {"enum": ["image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/webp"]},
    },
}
URL = {"type": "string", "pattern": r"^https?://[^\s]+$"}


def _document(
    required: list[str], schema_url: dict[str, Any], icon: dict[str, Any], remote: dict[str, Any]
) -> dict[str, Any]:
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": required,
        "properties": {
            "$schema": schema_url,
            "name": NAME,
            "description": DESCRIPTION,
            "version": VERSION,
            "title": TITLE,
            "websiteUrl": {"type": "string", "format": "uri"},
            "icons": {"type": "array", "items": icon},
            "remotes": {"type": "array", "items": remote},
            "_meta": {"type": "object"},
        },
    }


SERVER_JSON = _document(
    ["name", "description", "version"],
    {"const": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"},
    REGISTRY_ICON,
    {
        "type": "object",
        "required": ["type", "url"],
        "properties": {
            "type": {"enum": ["streamable-http", "sse"]},
            "url": URL,
            "headers": {"type": "array"},
            "variables": {"type": "object"},
        },
    },
)

SERVER_CARD = _document(
    ["$schema", "name", "description", "version"],
    {"type": "string", "pattern": r"^https://static\.modelcontextprotocol\.io/schemas/v1/server-card\.schema\.json$"},
    ICON,
    {
        "type": "object",
        "required": ["type", "url"],
        "properties": {
            "type": {"enum": ["streamable-http", "sse"]},
            "url": {"type": "string", "pattern": r"^(https?://[^\s]+|\{[a-zA-Z_][a-zA-Z0-9_]*\}[^\s]*)$"},
            "headers": {"type": "array"},
            "variables": {"type": "object"},
            "supportedProtocolVersions": {"type": "array", "items": {"type": "string"}},
        },
    },
)

# The AI Catalog entry of a server card (docs/discovery.md of the same extension).
AI_CATALOG = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["specVersion", "entries"],
    "properties": {
        "specVersion": {"type": "string"},
        "entries": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["identifier", "type"],
                "properties": {
                    "identifier": {"type": "string", "pattern": r"^urn:air:[^:]+:[^:]+:[^:]+$"},
                    "type": {"const": "application/mcp-server-card+json"},
                    "url": {"type": "string", "format": "uri"},
                    "data": {"type": "object"},
                },
                "oneOf": [{"required": ["url"]}, {"required": ["data"]}],
            },
        },
    },
}
