"""The rules a provisioned person's values follow here, beyond the SCIM schema's."""

from unicodedata import normalize

from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from scim2_models import InvalidValueException

from authserver.core.emails import domain_allowed, email_domain

USERNAME_MAX = 150  # Django's User.username
NAME_MAX = 150  # first_name, last_name
EMAIL_MAX = 254

_USERNAME = UnicodeUsernameValidator()


def comparison_key(user_name: str) -> str:
    """userName as SCIM compares it (caseExact false): NFC, lowercase (scim2-models'
    ``default_comparison_key``)."""
    return normalize("NFC", normalize("NFC", user_name).lower())


def checked_user_name(user_name: str) -> str:
    """A userName that can be this server's username (letters, digits and ``@.+-_``, at most
    150 characters), or ``invalidValue``."""
    if len(user_name) > USERNAME_MAX:
        raise InvalidValueException(detail=f"userName is at most {USERNAME_MAX} characters")
    try:
        _USERNAME(user_name)
    except ValidationError:
        raise InvalidValueException(detail="userName holds letters, digits and @ . + - _ only") from None
    return user_name


def checked_email(address: str, domains: list[str]) -> str:
    """An e-mail address of one of the organization's domains (``*``: any), or ``invalidValue``."""
    if len(address) > EMAIL_MAX or email_domain(address) is None:
        raise InvalidValueException(detail="emails.value must be an e-mail address")
    if not domain_allowed(address, domains):
        shown = ", ".join(f"@{each}" for each in domains) or "no domain (the operator has listed none)"
        raise InvalidValueException(detail=f"This organization's people have addresses at {shown}")
    return address
