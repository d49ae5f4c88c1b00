import logging
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings

import codex_metrics


class CodexSiteConfig(AppConfig):
    """The project itself as an app, for its start-up checks."""

    name = "codex_site"
    verbose_name = "Agent Codex site"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from codex_site import checks  # noqa: F401  (registers the start-up refusal)
        from codex_site.request_connections import close_request_connections

        request_finished.connect(close_request_connections, dispatch_uid="codex_close_request_connections")
        codex_metrics.configure(enabled=settings.CODEX_METRICS)
        # Python's warnings (WhiteNoise's "No directory at: .../static/" before collectstatic, say)
        # go to the configured handlers, so that with CODEX_LOG_FORMAT=json they are JSON lines too.
        logging.captureWarnings(True)

        # SQLite needs its directory; made when the process starts, not when settings load.
        database = settings.DATABASES["default"]
        if database["ENGINE"] == "django.db.backends.sqlite3":
            for name in (database["NAME"], database.get("TEST", {}).get("NAME")):
                if name:
                    Path(name).parent.mkdir(parents=True, exist_ok=True)
