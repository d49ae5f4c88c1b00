import datetime as dt

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authserver.core import policy
from authserver.core.scopes import ALL_SCOPES
from authserver.core.tokens import PersonShutOut, mint_access_token, person_may_hold_tokens


class Command(BaseCommand):
    help = (
        "Mint an access token for a headless agent, bound to this server's MCP resource. "
        "The token is printed once and stored only as a checksum."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username", help="whose codex the token opens")
        parser.add_argument(
            "--scopes", default=" ".join(ALL_SCOPES), help='space-separated, default "notes:read notes:write"'
        )
        parser.add_argument(
            "--lifetime",
            type=int,
            default=None,
            help="seconds the token lives (default 3600, or the policy's longest if shorter: "
            "CODEX_MAX_ACCESS_TOKEN_SECONDS, which a longer one may not exceed)",
        )

    def handle(self, *args, username: str, scopes: str, lifetime: int | None, **options) -> None:
        if lifetime is None:
            lifetime = min(3600, policy.max_access_token_seconds())
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        if not person_may_hold_tokens(user):  # asked again under the person's lock as it is minted
            raise CommandError(f"user {username!r} is inactive")
        # The operator's policy bounds what an operator mints too (mint_access_token itself
        # does not judge: benchmarks and tests mint what they need in-process).
        if too_long := policy.lifetime_refusal(lifetime):
            policy.refused(policy.MAX_ACCESS_TOKEN_LIFETIME, user_id=user.pk, reason=too_long)
            raise CommandError(too_long)
        try:
            token = mint_access_token(user=user, scopes=scopes.split(), lifetime=dt.timedelta(seconds=lifetime))
        except ValueError as error:
            raise CommandError(str(error)) from None
        except PersonShutOut:
            raise CommandError(f"user {username!r} is inactive") from None
        # The notice goes to stderr and the token alone to stdout, so TOKEN=$(...) keeps only the
        # token. It names the resource because a token minted for another port is refused there.
        self.stderr.write(
            f"Token for {username} ({scopes}), valid {lifetime} s, accepted only by {settings.CODEX_RESOURCE_URL} "
            "(CODEX_PUBLIC_URL); printed on standard output, never stored (only its checksum is)."
        )
        self.stdout.write(token)
