"""The domain of an e-mail address, one reading for every rule that looks at it: the operator's
SSO-only domains (``policy``), a single sign-on provider's allowed domains (sign-in and the
ID-JAG grant, ``authserver.enterprise``) and an organization's SCIM domains.

An address is ``local@domain`` with neither part empty; its domain is what follows the last
``@``, compared in lower case (domains are configured in lower case). Anything else, ``@acme.test``
among them, is of no domain, so no list of domains allows it.
"""

from collections.abc import Collection


def email_domain(address: str | None) -> str | None:
    """The address's domain in lower case, or None when it is not ``local@domain``."""
    local, at, domain = (address or "").rpartition("@")
    return domain.lower() if at and local and domain else None


def domain_allowed(address: str | None, domains: Collection[str]) -> bool:
    """Whether the address is at one of ``domains`` (lower case; ``"*"``: any domain)."""
    domain = email_domain(address)
    return domain is not None and ("*" in domains or domain in domains)
