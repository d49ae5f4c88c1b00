"""The static files' storage: WhiteNoise's compressed manifest storage, which never turns a
page into a 500 because ``collectstatic`` has not run.

``collectstatic`` writes every file under a name with its content hash and a manifest
(``staticfiles.json``) from plain names to hashed ones, and pages link the hashed names
(docs/deploy.md, "Static files"). Django's manifest storage raises ``ValueError: Missing
staticfiles manifest entry`` for a name the manifest lacks, and the page that links it (the
admin's sign-in, first) answers 500. A worker started before anything was collected, or on
files an older release collected, then cannot even be signed in to. Here such a name is
linked by its plain URL instead, which the application serves if the file is there (a
stale collection) and answers 404 otherwise: the page works, unstyled until
``collectstatic`` has run and the worker is restarted, and a WARNING names that step once
per missing file.
"""

import logging
import threading
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage

logger = logging.getLogger(__name__)

MISSING_STEP = "run `manage.py collectstatic --noinput` and restart the workers"


class CodexStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._reported: set[str] = set()
        self._lock = threading.Lock()

    def url(self, name: str | None, force: bool = False) -> str:
        try:
            return super().url(name, force)
        except ValueError:
            # Only a name the manifest lacks raises here (manifest_strict, Django's default).
            # A name that is no static file at all still raises: WhiteNoise asks about names it
            # derives from the collected ones (dropping what looks like a hash) and expects
            # the ValueError for those.
            if not name or finders.find(urlsplit(name).path) is None:
                raise
            self._report(name)
            return FileSystemStorage.url(self, name)

    def _report(self, name: str) -> None:
        with self._lock:
            if name in self._reported:
                return
            self._reported.add(name)
        logger.warning(
            "static file %r is not among the collected files in %s: pages link its plain name and are "
            "served unstyled; %s",
            name,
            settings.STATIC_ROOT,
            MISSING_STEP,
        )
