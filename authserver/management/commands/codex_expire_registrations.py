from django.conf import settings
from django.core.management.base import BaseCommand

from authserver.clients.registration import expire_pending


class Command(BaseCommand):
    help = (
        "Remove the dynamic client registrations that no person approved within CODEX_DCR_PENDING_SECONDS "
        "(each registration also does this, a batch at a time; this command clears them all, for a cron job)."
    )

    def handle(self, *args, **options) -> None:
        removed = batch = expire_pending()
        while batch:
            removed += (batch := expire_pending())
        minutes = settings.CODEX_DCR_PENDING_SECONDS // 60
        self.stdout.write(f"removed {removed} client registration(s) that nobody approved within {minutes} minutes")
