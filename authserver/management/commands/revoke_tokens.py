from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authserver.core.tokens import revoke_tokens


class Command(BaseCommand):
    help = "Revoke every access and refresh token of a user; their agents must sign in again."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        refreshed, deleted = revoke_tokens(user=user, by="operator")
        self.stdout.write(f"revoked {refreshed} refresh token(s) and {deleted} remaining access token(s) of {username}")
