"""Who this server is, in one record, and every face that shows it before anyone connects.

The record (name, title, version, description, icons, website, registry name) is what
``serverInfo`` carries (``create_server``), what the server card at ``<mcp>/server-card`` and
the AI Catalog at ``/.well-known/ai-catalog.json`` describe (``mcp_endpoint.discovery``), what
``server.json`` for the MCP Registry says (``manage.py export_server_json``), and what the OCI
image's ``io.modelcontextprotocol.server.name`` label defaults to (``Containerfile``,
``tests/test_container.py`` holds the two together). Nothing in it depends on who asks: it is
the same for every person and every token.

Where an instance is reached (its public URL) comes from the settings (``Instance.configured``);
the documents in ``docs/`` are rendered for ``DOCUMENTED``, an example instance, so that they
do not change with the environment they were exported in.
"""

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import mcp_types as types
from django.conf import settings

from mcp_endpoint import versions

NAME = "agent-codex"
TITLE = "Agent Codex"
VERSION = "0.1.0"
# One line; the server card and server.json both allow at most 100 characters.
DESCRIPTION = "A private notebook of field notes that AI agents save, get, search and update for their person."
DESCRIPTION_MAX_CHARS = 100

# The icon: the SVG scales to any size; the PNG is for clients that render only raster images
# (image/png is the one type every client that shows icons must support). Both are static files
# (codex_site/static/), linked by their plain names, which stay the same from release to release
# (collectstatic keeps them beside the hashed copies) so that a card or a registry entry fetched
# before a deploy still finds its icon after it. scripts/render_icon.sh makes the PNG from the SVG.
ICON_SVG = "codex/icon.svg"
ICON_PNG = "codex/icon-256.png"
ICON_PNG_SIZE = 256

# How long anything that describes the server may be kept by whoever fetched it: the tool
# listing and server/discover (ttlMs), the server card and the catalog (Cache-Control). They
# change only with a release, and every client sees a release's new tools within this time
# after its deploy.
DESCRIPTION_MAX_AGE_SECONDS = 3600

# The MCP Registry's server names (and the server card's): a reverse-DNS namespace, one slash,
# a name. The namespace must be one its publisher proved to the registry (docs/deploy.md).
REGISTRY_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
REGISTRY_NAME_MAX_CHARS = 200
# The namespace of an instance whose public host is no DNS name (an address, or localhost).
LOCAL_NAMESPACE = "local"

SERVER_JSON_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
SERVER_CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
SERVER_CARD_MEDIA_TYPE = "application/mcp-server-card+json"
AI_CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
# Appended to the Streamable HTTP URL: the location the server-card extension reserves.
SERVER_CARD_SUFFIX = "/server-card"


def registry_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a registry (and server card) name, or None."""
    if len(name) > REGISTRY_NAME_MAX_CHARS or not REGISTRY_NAME_PATTERN.match(name):
        return (
            f"{name!r} is not a registry name: a reverse-DNS namespace you own, one slash, a name, at most "
            f"{REGISTRY_NAME_MAX_CHARS} characters (like io.github.alice/agent-codex or com.example/agent-codex)"
        )
    return None


def namespace_of(public_url: str) -> str:
    """The reverse-DNS namespace of a public URL's host (``codex.example.org`` ->
    ``org.example.codex``), which the registry lets whoever proves that domain publish under;
    ``local`` for a host that is no DNS name."""
    host = urlsplit(public_url).hostname or ""
    try:
        ipaddress.ip_address(host)
        return LOCAL_NAMESPACE
    except ValueError:
        pass
    labels = host.split(".")
    namespace = ".".join(reversed(labels))
    if len(labels) < 2 or registry_name_problem(f"{namespace}/{NAME}"):
        return LOCAL_NAMESPACE
    return namespace


@dataclass(frozen=True)
class Instance:
    """Where one server is reached, and the two names an operator may set for it."""

    public_url: str  # an origin, like https://codex.example.org
    resource_url: str  # its MCP endpoint, <public_url>/mcp
    website_url_setting: str = ""  # CODEX_WEBSITE_URL; "" means the public URL's home page
    registry_name_setting: str = ""  # CODEX_REGISTRY_NAME; "" means one derived from the host

    @classmethod
    def configured(cls) -> "Instance":
        return cls(
            settings.CODEX_PUBLIC_URL,
            settings.CODEX_RESOURCE_URL,
            settings.CODEX_WEBSITE_URL,
            settings.CODEX_REGISTRY_NAME,
        )

    @property
    def website_url(self) -> str:
        return self.website_url_setting or self.public_url + "/"

    @property
    def registry_name(self) -> str:
        return self.registry_name_setting or f"{namespace_of(self.public_url)}/{NAME}"

    @property
    def server_card_url(self) -> str:
        return self.resource_url + SERVER_CARD_SUFFIX

    def static_url(self, name: str) -> str:
        # STATIC_URL is a path ("static/") or a URL of its own; either way, absolute.
        return urljoin(urljoin(self.public_url + "/", settings.STATIC_URL), name)

    def icons(self) -> list[dict[str, Any]]:
        """The icons as MCP's ``Icon`` (and the card's and server.json's) writes them."""
        return [
            {"src": self.static_url(ICON_SVG), "mimeType": "image/svg+xml", "sizes": ["any"]},
            {"src": self.static_url(ICON_PNG), "mimeType": "image/png", "sizes": [f"{ICON_PNG_SIZE}x{ICON_PNG_SIZE}"]},
        ]


# The example instance docs/server.json and docs/mcp-tools.json are rendered for.
DOCUMENTED = Instance("https://codex.example.org", "https://codex.example.org/mcp")


def server_info(instance: Instance) -> dict[str, Any]:
    """The keyword arguments of the SDK's ``Server`` that make ``serverInfo`` (MCP's
    ``Implementation``; description, websiteUrl and icons are members since 2025-11-25)."""
    return {
        "name": NAME,
        "title": TITLE,
        "version": VERSION,
        "description": DESCRIPTION,
        "website_url": instance.website_url,
        "icons": [types.Icon.model_validate(icon) for icon in instance.icons()],
    }


def _shown(instance: Instance) -> dict[str, Any]:
    """What the server card and server.json share, in their member names."""
    return {
        "name": instance.registry_name,
        "title": TITLE,
        "description": DESCRIPTION,
        "version": VERSION,
        "websiteUrl": instance.website_url,
        "icons": instance.icons(),
    }


def server_card(instance: Instance) -> dict[str, Any]:
    """The server card (the experimental server-card extension, SEP-2127: a draft): identity and
    how to connect, never the tools (clients list those once connected)."""
    remote = {
        "type": "streamable-http",
        "url": instance.resource_url,
        "supportedProtocolVersions": list(versions.SUPPORTED_VERSIONS),
    }
    return {"$schema": SERVER_CARD_SCHEMA, **_shown(instance), "remotes": [remote]}


def server_json(instance: Instance) -> dict[str, Any]:
    """server.json for the MCP Registry (schema 2025-12-11): this instance as a remote server.
    OAuth needs no header of the client's: a client finds it from the 401's challenge."""
    remote = {"type": "streamable-http", "url": instance.resource_url}
    return {"$schema": SERVER_JSON_SCHEMA, **_shown(instance), "remotes": [remote]}


def ai_catalog(instance: Instance) -> dict[str, Any]:
    """The AI Catalog listing this server's card: the domain-anchored identifier
    ``urn:air:<publisher>:mcp:<name>`` (the registry name's namespace written as a domain)."""
    namespace, name = instance.registry_name.split("/", 1)
    publisher = ".".join(reversed(namespace.split(".")))
    entry = {
        "identifier": f"urn:air:{publisher}:mcp:{name}",
        "type": SERVER_CARD_MEDIA_TYPE,
        "url": instance.server_card_url,
    }
    return {"specVersion": "1.0", "entries": [entry]}
