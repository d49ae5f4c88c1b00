"""Which origins django-cors-headers serves: CODEX_ALLOWED_ORIGINS, by the rule /mcp uses.

django-cors-headers asks its ``check_request_enabled`` signal about origins not in
``CORS_ALLOWED_ORIGINS`` (empty here). A truthy answer also turns CORS on for the
request's URL, so this answers only for the URLs in ``CORS_URLS_REGEX``.
"""

import re
from typing import Any

from corsheaders.signals import check_request_enabled
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest

from common.origins import origin_allowed


@receiver(check_request_enabled)
def allow_configured_origins(sender: Any, request: HttpRequest, **kwargs: Any) -> bool:
    return bool(re.match(settings.CORS_URLS_REGEX, request.path_info)) and origin_allowed(request.headers.get("origin"))
