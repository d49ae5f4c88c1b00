"""The operator's policy: which clients may connect, how long a token may live, and who must
use single sign-on. The one place that reads these settings and answers questions about them;
the endpoints that enforce a rule ask here, and /admin/policy/ shows what is in force.

- Metadata documents (CIMD clients) only from the hosts in ``CODEX_CIMD_ALLOWED_HOSTS`` (DOT's
  ``CIMD_ALLOWED_HOSTS``; ``*`` any, ``.example.com`` a domain and its subdomains, empty: none).
  A client from another host gets the refused-client page naming this rule
  (``authserver.oauth.views``), and its document is never fetched; a known one gets no new token
  (``invalid_client`` at the token endpoint, ``authserver.oauth.validators``).
- Dynamic Client Registration on or off (``CODEX_DCR_ENABLED``). Off: the registration endpoint
  answers 403, so does an update of an earlier registration (``authserver.clients.registration``), and
  the server's metadata names no ``registration_endpoint``.
- The identity providers trusted for ID-JAG grants: the single sign-on providers whose entry
  says ``"id_jag": true`` (shown here; the grant itself is another module's), and whether a
  public client may present an ID-JAG (``CODEX_ID_JAG_PUBLIC_CLIENTS``, off: only a client that
  authenticates with a secret or a key may, ``authserver.enterprise.id_jag.client_refusal``).
- The longest access-token lifetime (``CODEX_MAX_ACCESS_TOKEN_SECONDS``, by default the
  configured ``CODEX_ACCESS_TOKEN_SECONDS``): a longer configured lifetime refuses to start
  (``codex_site.checks``), and ``mint_token`` refuses a longer token.
- Password sign-in off for people of the domains in ``CODEX_SSO_ONLY_DOMAINS``
  (``authserver.people.signin``): refused only once the password has been found right, so the refusal
  tells nothing to someone who does not know it.

Every refusal writes one audit line, ``policy.refused``, with ``policy`` (the rule's name, one of
``RULES``), ``reason``, and ``client_id`` or ``user_id`` (``refused``).
"""

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host
from oauth2_provider.settings import oauth2_settings

from authserver.core.emails import email_domain
from common.audit import audit

# The rules' names, as the audit line's ``policy`` field and the admin page name them.
CIMD_HOSTS = "cimd_hosts"
DYNAMIC_REGISTRATION = "dynamic_registration"
MAX_ACCESS_TOKEN_LIFETIME = "max_access_token_lifetime"
SSO_ONLY_DOMAINS = "sso_only_domains"
RULES = (CIMD_HOSTS, DYNAMIC_REGISTRATION, MAX_ACCESS_TOKEN_LIFETIME, SSO_ONLY_DOMAINS)


# --- which clients may connect ------------------------------------------------------------------


def cimd_allowed_hosts() -> list[str]:
    """The hosts metadata documents are accepted from (Django's host patterns)."""
    return list(oauth2_settings.CIMD_ALLOWED_HOSTS or [])


def cimd_hosts_words() -> str:
    hosts = cimd_allowed_hosts()
    if not hosts:
        return "no host (metadata documents are off)"
    if "*" in hosts:
        return "any host"
    return ", ".join(hosts)


def cimd_host_allowed(client_id: str) -> bool:
    """Whether the metadata document at ``client_id`` comes from a host the operator allows."""
    host = urlsplit(client_id).hostname or ""
    return validate_host(host, cimd_allowed_hosts())


def cimd_refusal_words(client_id: str) -> str:
    """What the refused-client page and the audit line say about a host not allowed."""
    host = urlsplit(client_id).hostname or ""
    return f"metadata documents are accepted only from {cimd_hosts_words()}, and {host or 'this address'} is not one"


def dcr_enabled() -> bool:
    """Whether Dynamic Client Registration (RFC 7591) is open."""
    return bool(settings.CODEX_DCR_ENABLED)


DCR_REFUSAL = (
    "Dynamic Client Registration is turned off on this server by its operator's policy "
    "(CODEX_DCR_ENABLED=0). Identify the application with a Client ID Metadata Document "
    "(an https client_id) instead, or ask the operator."
)


def id_jag_providers() -> list[dict[str, Any]]:
    """The single sign-on providers, each with whether it is trusted for ID-JAG grants."""
    return [
        {
            "id": provider.get("id", ""),
            "name": provider.get("name") or provider.get("id", ""),
            "issuer": provider.get("issuer", ""),
            "domains": list(provider.get("domains", [])),
            "id_jag": bool(provider.get("id_jag", False)),
        }
        for provider in settings.CODEX_SSO_PROVIDERS
    ]


def id_jag_public_clients() -> bool:
    """Whether a public client (one that authenticates with its id alone) may present an ID-JAG.
    The draft's security considerations say the grant SHOULD be served to confidential clients
    only: anyone holding an ID-JAG issued to a public client can redeem it as that client."""
    return bool(settings.CODEX_ID_JAG_PUBLIC_CLIENTS)


# --- tokens -------------------------------------------------------------------------------------


def max_access_token_seconds() -> int:
    return int(settings.CODEX_MAX_ACCESS_TOKEN_SECONDS)


def lifetime_refusal(seconds: int) -> str | None:
    """Why an access token living ``seconds`` is refused, or None when the policy allows it."""
    longest = max_access_token_seconds()
    if seconds <= longest:
        return None
    return (
        f"a lifetime of {seconds} s is longer than the operator's policy allows: at most {longest} s "
        "(CODEX_MAX_ACCESS_TOKEN_SECONDS)"
    )


def configuration_problem() -> str | None:
    """A policy the configuration contradicts, for the start-up check (``codex_site.checks``)."""
    configured = int(settings.OAUTH2_PROVIDER.get("ACCESS_TOKEN_EXPIRE_SECONDS", 0))
    longest = max_access_token_seconds()
    if longest <= 0:
        return f"CODEX_MAX_ACCESS_TOKEN_SECONDS must be a positive number of seconds, not {longest}"
    if configured > longest:
        return (
            f"CODEX_ACCESS_TOKEN_SECONDS (OAUTH2_PROVIDER ACCESS_TOKEN_EXPIRE_SECONDS) is {configured} s, longer "
            f"than CODEX_MAX_ACCESS_TOKEN_SECONDS, the longest the policy allows ({longest} s): lower the first "
            "or raise the second"
        )
    return None


# --- people -------------------------------------------------------------------------------------


def sso_only_domains() -> frozenset[str]:
    return frozenset(domain.lower().lstrip("@") for domain in settings.CODEX_SSO_ONLY_DOMAINS)


def sso_only_domain(user: Any) -> str | None:
    """The listed domain that makes ``user`` sign in with single sign-on only, or None. The
    domain is their e-mail address's, or their username's when that is an address."""
    listed = sso_only_domains()
    if not listed:
        return None
    for address in (getattr(user, "email", ""), user.get_username()):
        domain = email_domain(address)
        if domain in listed:
            return domain
    return None


def sso_only_message(domain: str) -> str:
    return (
        f"People of {domain} sign in with their organization's sign-in (single sign-on), not with a "
        "password here: use your organization's button on the sign-in page."
    )


# --- refusals and the admin page ----------------------------------------------------------------


def refused(rule: str, *, reason: str, client_id: str | None = None, user_id: int | None = None) -> None:
    """Write the audit line of one refusal by ``rule`` (one of ``RULES``)."""
    if rule not in RULES:
        raise ValueError(f"unknown policy rule {rule!r}")
    audit("policy.refused", policy=rule, client_id=client_id, user_id=user_id, reason=reason)


@dataclass(frozen=True)
class Setting:
    name: str  # the environment variable
    value: str  # its effective value, in words
    meaning: str  # what it allows and refuses


def effective() -> list[Setting]:
    """The policy in force, for the admin page."""
    domains = sorted(sso_only_domains())
    trusted = [provider["id"] for provider in id_jag_providers() if provider["id_jag"]]
    return [
        Setting(
            "CODEX_CIMD_ALLOWED_HOSTS",
            cimd_hosts_words(),
            "Applications identified by a metadata document (an https client_id) connect only from these "
            "hosts; any other gets the refused-client page naming this rule, and its document is not fetched.",
        ),
        Setting(
            "CODEX_DCR_ENABLED",
            "on" if dcr_enabled() else "off",
            "On: applications may register themselves (RFC 7591). Off: the registration endpoint answers 403 "
            "and the server's metadata names no registration_endpoint; applications registered before keep working, "
            "and may read or remove their registration but not change it (RFC 7592 updates answer 403).",
        ),
        Setting(
            "CODEX_OIDC_PROVIDERS (id_jag)",
            ", ".join(trusted) or "none",
            'The identity providers trusted for ID-JAG grants: the single sign-on providers with "id_jag": true '
            "(table below).",
        ),
        Setting(
            "CODEX_ID_JAG_PUBLIC_CLIENTS",
            "on" if id_jag_public_clients() else "off",
            "Off: an ID-JAG is accepted only from a confidential client (one that authenticates with a client "
            "secret or private_key_jwt); a public client gets unauthorized_client. On: public clients may present "
            "ID-JAGs too, and anyone who obtains one issued to a public client can redeem it.",
        ),
        Setting(
            "CODEX_MAX_ACCESS_TOKEN_SECONDS",
            f"{max_access_token_seconds()} s",
            "The longest an access token may live. A configured CODEX_ACCESS_TOKEN_SECONDS "
            f"(now {settings.OAUTH2_PROVIDER.get('ACCESS_TOKEN_EXPIRE_SECONDS')} s) above it refuses to start; "
            "mint_token refuses a longer --lifetime.",
        ),
        Setting(
            "CODEX_SSO_ONLY_DOMAINS",
            ", ".join(domains) or "none",
            "People whose e-mail domain is listed must use single sign-on: a sign-in with their right password is "
            "refused (a wrong one gets the ordinary error), and so is a password check before a change.",
        ),
    ]
