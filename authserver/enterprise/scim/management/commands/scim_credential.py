"""The operator's side of SCIM: an organization and its credential (authserver.enterprise.scim)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization


class Command(BaseCommand):
    help = (
        "Issue (or replace) an organization's SCIM credential, printed once and stored only as a "
        "checksum; revoke it; or list the organizations."
    )

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        issue = actions.add_parser("issue", help="make the organization if new, and print a new credential")
        issue.add_argument("organization", help="a short name (letters, digits, - and _)")
        issue.add_argument(
            "--provider",
            default=None,
            help="the CODEX_OIDC_PROVIDERS id its people sign in with (their first sign-in finds their account)",
        )
        issue.add_argument(
            "--domain",
            action="append",
            default=None,
            help='an e-mail domain its people\'s addresses must be at (repeat it; "*": any). '
            "Default: the provider's domains",
        )
        revoke = actions.add_parser("revoke", help="revoke the organization's credential (its people stay)")
        revoke.add_argument("organization")
        actions.add_parser("list", help="the organizations, their provider, domains and people")

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    @transaction.atomic
    def _issue(self, *, organization: str, provider: str | None, domain: list[str] | None, **options) -> None:
        name = slugify(organization)
        if not name or name != organization:
            raise CommandError("the organization's name is letters, digits, - and _")
        found = Organization.objects.select_for_update().filter(name=name).first()
        if provider is not None:
            providers = {each["id"]: each for each in settings.CODEX_SSO_PROVIDERS}
            if provider not in providers:
                raise CommandError(f"no provider {provider!r} in CODEX_OIDC_PROVIDERS")
        domains = sorted({each.strip().lower().lstrip("@") for each in domain or [] if each.strip()})
        if found is None:
            if not domains and provider is not None:
                domains = list(next(each for each in settings.CODEX_SSO_PROVIDERS if each["id"] == provider)["domains"])
            if not domains:
                raise CommandError('name the domains of its people\'s addresses: --domain example.org (or "*")')
            found = Organization.objects.create(name=name, provider_id=provider or "", domains=domains)
        else:
            changed = []
            if provider is not None:
                found.provider_id = provider
                changed.append("provider_id")
            if domains:
                found.domains = domains
                changed.append("domains")
            if changed:
                found.save(update_fields=changed)
        credential = credentials.issue(organization=found)
        self.stdout.write(
            f"SCIM credential of {found.name} (shown once; give it to the identity provider as its bearer token):\n"
            f"{credential}\n"
            f"SCIM base URL: {settings.CODEX_PUBLIC_URL}/scim/v2\n"
            f"provider: {found.provider_id or '(none)'}; domains: {', '.join(found.domains)}"
        )

    def _revoke(self, *, organization: str, **options) -> None:
        found = Organization.objects.filter(name=organization).first()
        if found is None:
            raise CommandError(f"no organization {organization!r}")
        credentials.revoke(organization=found)
        self.stdout.write(f"revoked the SCIM credential of {found.name}; its people stay as they are")

    def _list(self, **options) -> None:
        for organization in Organization.objects.order_by("name"):
            state = "credential issued" if organization.credential_checksum else "no credential"
            self.stdout.write(
                f"{organization.name}: {state}; provider {organization.provider_id or '(none)'}; "
                f"domains {', '.join(organization.domains)}; {organization.people.count()} people"
            )
