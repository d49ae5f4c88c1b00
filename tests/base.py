"""Shared test scaffolding: named people with codexes, and small builders."""

import datetime as dt
import itertools
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TestCase, TransactionTestCase
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

from authserver.core.tokens import mint_access_token
from mcp_endpoint.auth import check_bearer_token
from notebook import services
from notebook.models import Codex, Entry
from notebook.validation import parse_entry_input
from tests.mcp_client import call_tool_directly, error_of

_request_ids = itertools.count(1)


def nested(depth: int) -> dict:
    """A JSON object nested ``depth`` levels deep (the object itself is level 1)."""
    tree: dict = {"leaf": 1}
    for _ in range(depth - 1):
        tree = {"n": tree}
    return tree


def connect_application(user, name: str, scopes: str = "notes:read notes:write", application=None):
    """A connected application of ``user`` (created unless given) and a raw access token it
    holds for this server, as the authorization-code flow would leave them."""
    Application = get_application_model()
    if application is None:
        application = Application.objects.create(
            name=name,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )
    raw = f"token-{name}-{user.pk}-{next(_request_ids)}"
    token = get_access_token_model()(
        user=user,
        application=application,
        expires=timezone.now() + dt.timedelta(hours=1),
        scope=scopes,
        resource=[settings.CODEX_RESOURCE_URL],
    )
    set_token_value(token, raw)
    token.save()
    return application, raw


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


class NotebookTestCase(TestCase):
    """Alice and Bob, each with a codex."""

    alice_codex: Codex
    bob_codex: Codex

    @classmethod
    def setUpTestData(cls) -> None:
        User = get_user_model()
        cls.alice = User.objects.create_user("alice", password="alice-password")
        cls.bob = User.objects.create_user("bob", password="bob-password")
        cls.alice_codex = services.codex_for_user(user=cls.alice)
        cls.bob_codex = services.codex_for_user(user=cls.bob)

    def save(self, codex: Codex | None = None, request_id: str | None = None, **entry: Any) -> Entry:
        entry.setdefault("content", "a field note")
        return services.entry_save(
            codex=codex or self.alice_codex,
            request_id=request_id or f"req-{next(_request_ids)}",
            data=parse_entry_input(entry),
        )


class GrantTestCase(TransactionTestCase):
    """Alice with a checked two-scope grant, for calling the tool handler directly
    as if the HTTP check had passed."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice")
        token = mint_access_token(user=self.alice, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1))
        self.grant = check_bearer_token(token)

    def call_error(self, name: str, arguments: dict) -> dict:
        """The notebook failure of a tool call (its exact form checked)."""
        return error_of(call_tool_directly(self.grant, name, arguments))


STILL_MOMENT = 1_800_000_000.0


def last_use_already_written(test, raw_token: str):
    """Hold the last-use clock still (authserver.core.last_used) with this token's minute already
    written, so that a test counting a call's statements counts the call's own: the last use
    is written on the first call of a minute only. Returns the stand-in, whose ``clock`` a test
    may move on."""
    from unittest import mock

    from authserver.core import last_used
    from authserver.core.token_check import token_checksum

    token = get_access_token_model().objects.get(token_checksum=token_checksum(raw_token))
    uses = last_used.LastUsed(clock=lambda: STILL_MOMENT)
    patcher = mock.patch.object(last_used, "LAST_USED", uses)
    patcher.start()
    test.addCleanup(patcher.stop)
    uses.touch(token.user_id, token.application_id)
    return uses


def authorization_code(user, application, scopes: str = "notes:read notes:write") -> tuple[str, str]:
    """An authorization code (and its PKCE verifier) for ``user`` and ``application``, as the
    authorization endpoint leaves one once the person approved: bound to this server's resource,
    S256, 60 seconds. Returns (code, verifier)."""
    from oauth2_provider.models import get_grant_model

    from tests.oauth_helpers import REDIRECT_URI, pkce_pair

    verifier, challenge = pkce_pair()
    code = f"code-{next(_request_ids)}-{user.pk}"
    get_grant_model().objects.create(
        application=application,
        user=user,
        code=code,
        expires=timezone.now() + dt.timedelta(seconds=60),
        redirect_uri=REDIRECT_URI,
        scope=scopes,
        code_challenge=challenge,
        code_challenge_method="S256",
        resource=[settings.CODEX_RESOURCE_URL],
    )
    return code, verifier
