import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from authserver.people import leaving


class Command(BaseCommand):
    help = (
        "Delete a person's account and everything of theirs: their codex (entries, revisions, request keys), "
        "tokens, grants, sessions, second factors, single sign-on links, and the applications registered only "
        "for them. What backups still hold: docs/data.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--yes", action="store_true", help="do not ask (without a terminal, --yes is required)")

    def handle(self, *args, username: str, yes: bool, **options) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        summary = leaving.what_goes(user=user)
        if not yes:
            if not sys.stdin.isatty():
                raise CommandError("not a terminal: pass --yes to delete without asking")
            self.stdout.write(
                f"This deletes {username} for good, with {summary['entries']} entries and the access of "
                f"{summary['connected']} connected application(s)."
            )
            if input(f"Type {username!r} to confirm: ").strip() != username:
                raise CommandError("not confirmed; nothing was deleted")
        report = leaving.account_delete(user=user, by="operator")
        self.stdout.write(f"deleted {report.summary()}")
