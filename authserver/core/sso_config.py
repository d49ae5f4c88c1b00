"""Single sign-on providers read from ``CODEX_OIDC_PROVIDERS`` (no Django import: settings
call this).

The variable holds a JSON list, one object per OpenID Connect provider::

    [{"id": "acme", "name": "Acme staff", "issuer": "https://login.acme.example",
      "client_id": "...", "secret": "...", "domains": ["acme.example"],
      "match_existing": false, "signup": true, "id_jag": false}]

- ``id``: letters, digits, ``-`` and ``_``; the provider's callback is
  ``<public URL>/accounts/oidc/<id>/login/callback/`` (register that at the provider);
- ``issuer``: the provider's issuer URL, exactly as the provider publishes it (its discovery
  document's ``issuer``, its tokens' ``iss``), a trailing slash included: Auth0's end in ``/``,
  and RFC 8414 §3.3 and OpenID Connect Discovery §4.3 compare issuers exactly. Its discovery
  document is at ``discovery_url(issuer)``;
- ``secret`` may be left out for ``secret_env``, the name of a variable that holds it;
- ``domains``: the email domains allowed to sign in (required, at least one; ``"*"`` allows
  any verified email);
- ``match_existing``: a first sign-in whose verified email (of an allowed domain) is an
  existing local account's signs in to that account instead of making a new one;
- ``signup`` (default true): whether a person this server does not know yet gets an account
  on their first sign-in through this provider (false: only people already linked to it, or
  provisioned through SCIM, sign in). The same setting decides it for an ID-JAG;
- ``id_jag`` (default false): this provider's issuer is trusted for Enterprise-Managed
  Authorization (``authserver.enterprise.id_jag``): an Identity Assertion JWT Authorization Grant it signs
  gets an access token for the person it names, with no consent page. Its issuer must be an
  https URL (its keys are fetched from its discovery document).

Each becomes an app of allauth's generic ``openid_connect`` provider, with PKCE.
"""

import json
import os
import re
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_KNOWN = {
    "id",
    "name",
    "issuer",
    "client_id",
    "secret",
    "secret_env",
    "domains",
    "match_existing",
    "signup",
    "id_jag",
}


def parse_providers(raw: str) -> list[dict[str, Any]]:
    """The providers ``CODEX_OIDC_PROVIDERS`` names, checked; a mistake refuses to start."""
    if not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"CODEX_OIDC_PROVIDERS must be a JSON list: {error}") from None
    if not isinstance(data, list):
        raise ImproperlyConfigured("CODEX_OIDC_PROVIDERS must be a JSON list of provider objects")
    providers, seen = [], set()
    for index, item in enumerate(data):
        where = f"CODEX_OIDC_PROVIDERS[{index}]"
        if not isinstance(item, dict):
            raise ImproperlyConfigured(f"{where} must be an object")
        unknown = set(item) - _KNOWN
        if unknown:
            raise ImproperlyConfigured(f"{where} has unknown members: {', '.join(sorted(unknown))}")
        provider_id = item.get("id")
        if not isinstance(provider_id, str) or not _ID.match(provider_id) or provider_id in seen:
            raise ImproperlyConfigured(f"{where}.id must be a unique name of letters, digits, - and _")
        seen.add(provider_id)
        issuer = item.get("issuer")
        if (
            not isinstance(issuer, str)
            or urlsplit(issuer).scheme not in {"http", "https"}
            or not urlsplit(issuer).hostname
        ):
            raise ImproperlyConfigured(f"{where}.issuer must be the provider's http(s) issuer URL")
        client_id = item.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise ImproperlyConfigured(f"{where}.client_id is required")
        secret = item.get("secret")
        if secret is None and isinstance(item.get("secret_env"), str):
            secret = os.environ.get(item["secret_env"])
        if not isinstance(secret, str) or not secret:
            raise ImproperlyConfigured(f"{where}: a secret (or secret_env naming a set variable) is required")
        domains = item.get("domains")
        if (
            not isinstance(domains, list)
            or not domains
            or not all(isinstance(domain, str) and domain.strip() for domain in domains)
        ):
            raise ImproperlyConfigured(f'{where}.domains must list the allowed email domains (or "*")')
        match_existing = item.get("match_existing", False)
        if not isinstance(match_existing, bool):
            raise ImproperlyConfigured(f"{where}.match_existing must be true or false")
        signup, id_jag = item.get("signup", True), item.get("id_jag", False)
        if not isinstance(signup, bool) or not isinstance(id_jag, bool):
            raise ImproperlyConfigured(f"{where}.signup and {where}.id_jag must be true or false")
        if id_jag and urlsplit(issuer).scheme != "https":
            raise ImproperlyConfigured(f"{where}.issuer must be https to be trusted for ID-JAG (id_jag)")
        name = item.get("name", provider_id)
        if not isinstance(name, str) or not name.strip():
            raise ImproperlyConfigured(f"{where}.name must be a display name")
        providers.append(
            {
                "id": provider_id,
                "name": name.strip(),
                "issuer": issuer,
                "client_id": client_id,
                "secret": secret,
                "domains": sorted({domain.strip().lower().lstrip("@") for domain in domains}),
                "match_existing": match_existing,
                "signup": signup,
                "id_jag": id_jag,
            }
        )
    return providers


def discovery_url(issuer: str) -> str:
    """Where an issuer's OpenID Connect discovery document is: the issuer, less a terminating
    ``/``, then ``/.well-known/openid-configuration`` (OpenID Connect Discovery §4). The issuer
    itself is kept as written, and compared exactly with the document's ``issuer``."""
    return issuer.removesuffix("/") + "/.well-known/openid-configuration"


def allauth_providers(providers: list[dict[str, Any]]) -> dict[str, Any]:
    """``SOCIALACCOUNT_PROVIDERS`` for these providers: one ``openid_connect`` app each. The
    app's settings also carry this server's rules (domains, matching), read by
    ``authserver.enterprise.sso``. allauth appends ``/.well-known/openid-configuration`` to a
    ``server_url`` that does not name the document already, which after an issuer's trailing
    slash would make ``//``: it is given the document's address."""
    if not providers:
        return {}
    return {
        "openid_connect": {
            "OAUTH_PKCE_ENABLED": True,
            "APPS": [
                {
                    "provider_id": provider["id"],
                    "name": provider["name"],
                    "client_id": provider["client_id"],
                    "secret": provider["secret"],
                    "settings": {
                        "server_url": discovery_url(provider["issuer"]),
                        "codex_domains": provider["domains"],
                        "email_authentication": provider["match_existing"],
                        "codex_signup": provider["signup"],
                    },
                }
                for provider in providers
            ],
        }
    }


def provider_origins(providers: list[dict[str, Any]]) -> list[str]:
    """Origins the sign-in page's forms may lead to (CSP form-action): each issuer's."""
    origins = []
    for provider in providers:
        parts = urlsplit(provider["issuer"])
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return sorted(set(origins))
