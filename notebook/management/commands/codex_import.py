"""manage.py codex_import USERNAME FILE: the same import as /codex/import/, without its size limit."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notebook.management.commands._progress import Progress
from notebook.services import codex_for_user
from notebook.transfer import ImportRefused, codex_import, load_document


class Command(BaseCommand):
    help = "Import an export JSON document into a person's codex: validated, idempotent, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("file")

    def handle(self, *args, username: str, file: str, **options) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        try:
            document = load_document(Path(file).read_bytes())
        except OSError as error:
            raise CommandError(f"cannot read {file}: {error.strerror}") from None
        except ImportRefused as error:
            raise CommandError(f"nothing imported: {error}") from None
        progress = Progress(self.stderr._out, len(document["entries"]), "importing")
        try:
            report = codex_import(codex=codex_for_user(user=user), document=document, progress=progress)
        except ImportRefused as error:
            raise CommandError(str(error)) from None
        finally:
            progress.finish()
        if not report.applied:
            for refusal in report.refused:
                self.stderr.write(f"entry #{refusal.index} {refusal.entry_id or '(no id)'}: {refusal.reason}")
            raise CommandError(
                f"nothing imported: {report.refused_count} of {report.total} entries break a rule (listed above)"
            )
        self.stdout.write(
            f"imported {report.created} of {report.total} entries into {username}'s codex; "
            f"{report.already_present} already present, {report.renumbered} given a new id"
        )
