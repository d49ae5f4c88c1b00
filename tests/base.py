"""Shared test scaffolding: named people with codexes, and small builders."""

import itertools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TestCase

from notebook import services
from notebook.models import Codex, Entry
from notebook.validation import parse_entry_input

_request_ids = itertools.count(1)


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
