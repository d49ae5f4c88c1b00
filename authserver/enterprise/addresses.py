"""The accounts an e-mail address names, one answer for every door that asks: single sign-on's
"an account with this address exists" (``sso``), the ID-JAG grant's (``id_jag``), and the first
sign-in of a person an organization provisioned (``scim.links``).

An address names an account that keeps it as its e-mail address, as its username (an IdP's
userName is often the address, and SCIM keeps it so), or in one of allauth's ``EmailAddress``
rows (the ID-JAG grant and single sign-on make one), compared case-insensitively: the case an
IdP or a person writes an address in says nothing about whose it is.
"""

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet


def accounts_named_by(emails: Iterable[str]) -> QuerySet:
    """The accounts any of ``emails`` names. An address holding U+0000 names none (no stored
    one can hold it, and PostgreSQL cannot even compare it)."""
    named = Q()
    for email in emails:
        if email and "\x00" not in email:
            named |= Q(email__iexact=email) | Q(username__iexact=email) | Q(emailaddress__email__iexact=email)
    if not named:
        return get_user_model().objects.none()
    return get_user_model().objects.filter(named).distinct()
