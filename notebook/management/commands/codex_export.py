"""manage.py codex_export USERNAME [-o FILE]: the same export as /codex/export.json, streamed."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notebook.management.commands._progress import Progress
from notebook.models import Entry
from notebook.services import codex_for_user
from notebook.transfer import export_json_chunks


class Command(BaseCommand):
    help = "Write a person's whole codex (every entry with every revision) as one export JSON document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, username: str, output: str | None, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        codex = codex_for_user(user=user)
        progress = Progress(self.stderr._out, Entry.objects.filter(codex=codex).count(), "exporting")
        chunks = export_json_chunks(codex=codex, progress=progress)
        try:
            if output:
                with open(output, "w", encoding="utf-8") as target:
                    target.writelines(chunks)
            else:
                for chunk in chunks:
                    self.stdout.write(chunk, ending="")
        finally:
            progress.finish()
        if output:
            self.stderr.write(f"exported {progress.total} entries of {username} to {output}")
