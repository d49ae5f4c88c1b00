from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from oauth2_provider.models import get_access_token_model, get_refresh_token_model


class Command(BaseCommand):
    help = "Revoke every access and refresh token of a user; their agents must sign in again."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    @transaction.atomic
    def handle(self, *args, username: str, **options) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        refresh_tokens = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True)
        refreshed = 0
        for refresh_token in refresh_tokens:
            refresh_token.revoke()  # DOT's own revoke also deletes its access token
            refreshed += 1
        deleted, _ = get_access_token_model().objects.filter(user=user).delete()
        self.stdout.write(f"revoked {refreshed} refresh token(s) and {deleted} remaining access token(s) of {username}")
