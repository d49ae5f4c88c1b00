from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authserver.core.revocation import access_revoke


class Command(BaseCommand):
    help = (
        "Revoke every token and authorization code of a user and end their sessions; their clients "
        "and agents must be authorized again, and they sign in again."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        revoked = access_revoke(user=user, by="operator")
        self.stdout.write(
            f"revoked {revoked.refresh_tokens} refresh token(s), {revoked.access_tokens} access token(s) and "
            f"{revoked.codes} authorization code(s) of {username}, and ended {revoked.sessions} session(s)"
        )
