"""Token issuance under races, over real HTTP (contract 8: a refresh token is exchanged at most
once; a replayed authorization code revokes the tokens it issued; no race answers 500).

Each race is made to happen: the test holds a row lock that one side takes, waits until PostgreSQL
shows that side waiting for it (``pg_locks``, read afresh by each statement; never a sleep), does
its own part, and lets go. SQLite runs one write transaction at a time, so no two of these can
interleave there: the held-lock tests run on PostgreSQL, the rules without a race on both.
"""

import datetime as dt
import secrets
import threading
import time
import unittest
import uuid
from collections import Counter
from collections.abc import Callable

import httpx2
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction
from django.db.models.signals import post_save
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
    set_token_value,
)

from authserver.core import exchange
from authserver.models import CodeRedemption
from mcp_endpoint.auth import token_checksum
from tests.base import authorization_code, on_postgres
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.oauth_helpers import exchange_code, refresh

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()


class IssuanceTestCase(LiveServerTestCase):
    """Alice, a public client of hers (as dynamic registration makes one), and tokens it gets at
    the real token endpoint."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        Application = get_application_model()
        self.application = Application.objects.create(
            name="racing client",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )
        self.client_id = self.application.client_id
        self.base = self.live.base_url

    def redeem(self, code: str, verifier: str) -> httpx2.Response:
        return exchange_code(self.base, self.client_id, code, verifier)

    def tokens(self) -> dict:
        """A fresh pair, from a code exchanged at the token endpoint."""
        answer = self.redeem(*authorization_code(self.alice, self.application))
        self.assertEqual(answer.status_code, 200, answer.text)
        return answer.json()

    def refresh(self, refresh_token: str) -> httpx2.Response:
        return refresh(self.base, self.client_id, refresh_token)

    def live_tokens(self) -> tuple[int, int]:
        """(access tokens, live refresh tokens) this client holds for Alice."""
        access = AccessToken.objects.filter(user=self.alice, application=self.application).count()
        live = RefreshToken.objects.filter(user=self.alice, application=self.application, revoked__isnull=True)
        return access, live.count()

    def assertInvalidGrant(self, answer: httpx2.Response) -> None:
        self.assertEqual(answer.status_code, 400, answer.text)
        self.assertEqual(answer.json()["error"], "invalid_grant")

    def in_thread(self, request: Callable[[], httpx2.Response], answers: list) -> threading.Thread:
        def run() -> None:
            try:
                answers.append(request())
            finally:
                connections.close_all()

        return threading.Thread(target=run)


@unittest.skipUnless(on_postgres(), "row locks: SQLite runs one write transaction at a time")
class HeldLockRacesTest(IssuanceTestCase):
    def wait_until_waiting(self, count: int, worker: threading.Thread, what: str) -> None:
        """Return once ``count`` lock requests wait in PostgreSQL; fail if ``worker`` ends first."""
        for _ in range(6000):  # bounded: a lock that is not taken fails the test instead of hanging it
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0] >= count:
                    return
            if not worker.is_alive():
                self.fail(f"{what} finished without waiting for the lock the test holds")
            time.sleep(0.01)
        self.fail(f"{what} did not reach the lock in 60 s")

    def test_a_refresh_sent_while_another_rotates_the_token_gets_invalid_grant_and_one_pair_is_left(self) -> None:
        issued = self.tokens()
        row = RefreshToken.objects.get(token_checksum=token_checksum(issued["refresh_token"]))
        first: list[httpx2.Response] = []
        second: list[httpx2.Response] = []
        rotating = self.in_thread(lambda: self.refresh(issued["refresh_token"]), first)
        waiting = self.in_thread(lambda: self.refresh(issued["refresh_token"]), second)
        with transaction.atomic():
            # The access token a rotation replaces is the last row it deletes: held here, the first
            # rotation stays in progress with the refresh token's row locked, until the test lets go.
            AccessToken.objects.select_for_update().get(pk=row.access_token_id)
            rotating.start()
            self.wait_until_waiting(1, rotating, "the first refresh")
            waiting.start()
            self.wait_until_waiting(2, waiting, "the second refresh")
        rotating.join(timeout=120)
        waiting.join(timeout=120)
        [rotated], [refused] = first, second
        self.assertEqual(rotated.status_code, 200, rotated.text)
        self.assertInvalidGrant(refused)
        # One pair: the first's, which works; the token both sent is spent.
        self.assertEqual(self.live_tokens(), (1, 1))
        self.assertTrue(
            RefreshToken.objects.filter(
                token_checksum=token_checksum(rotated.json()["refresh_token"]), revoked__isnull=True
            ).exists()
        )
        self.assertEqual(
            call_tool(self.mcp_url, rotated.json()["access_token"], "field_notes_search", {}).status_code, 200
        )

    def test_a_refresh_racing_the_persons_revocation_gets_invalid_grant_and_leaves_no_token(self) -> None:
        issued = self.tokens()
        page = Client()
        page.force_login(self.alice)
        answers: list[httpx2.Response] = []
        request = self.in_thread(lambda: self.refresh(issued["refresh_token"]), answers)
        with transaction.atomic():
            # What every issuance for a person and every revocation of theirs take first: their row.
            get_user_model().objects.select_for_update().get(pk=self.alice.pk)
            request.start()
            self.wait_until_waiting(1, request, "the refresh")
            # Connected applications' revoke, in the transaction that holds the lock.
            self.assertEqual(page.post(f"/account/clients/{self.application.pk}/revoke/").status_code, 302)
        request.join(timeout=120)
        [answer] = answers
        self.assertInvalidGrant(answer)
        self.assertEqual(self.live_tokens(), (0, 0))

    def test_a_refresh_racing_the_revocation_of_its_refresh_token_gets_invalid_grant(self) -> None:
        issued = self.tokens()
        answers: list[httpx2.Response] = []
        request = self.in_thread(lambda: self.refresh(issued["refresh_token"]), answers)
        with transaction.atomic():
            # A rotation reads its refresh token again under this lock before it issues anything.
            row = RefreshToken.objects.select_for_update().get(token_checksum=token_checksum(issued["refresh_token"]))
            request.start()
            self.wait_until_waiting(1, request, "the refresh")
            # Revoked as /o/revoke_token/ revokes a refresh token (DOT's RefreshToken.revoke), in
            # the transaction that holds its lock.
            row.revoke()
        request.join(timeout=120)
        [answer] = answers
        self.assertInvalidGrant(answer)
        self.assertEqual(self.live_tokens(), (0, 0))

    def test_a_code_redeemed_while_the_person_revokes_the_client_gets_invalid_grant(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        page = Client()
        page.force_login(self.alice)
        answers: list[httpx2.Response] = []
        request = self.in_thread(lambda: self.redeem(code, verifier), answers)
        with transaction.atomic():
            get_user_model().objects.select_for_update().get(pk=self.alice.pk)
            request.start()
            self.wait_until_waiting(1, request, "the code's redemption")
            self.assertEqual(page.post(f"/account/clients/{self.application.pk}/revoke/").status_code, 302)
        request.join(timeout=120)
        [answer] = answers
        self.assertInvalidGrant(answer)
        self.assertEqual(self.live_tokens(), (0, 0))
        self.assertFalse(Grant.objects.filter(code=code).exists())

    def test_a_code_redeemed_twice_at_once_issues_nothing_that_stays(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        answers: list[httpx2.Response] = []
        first = self.in_thread(lambda: self.redeem(code, verifier), answers)
        second = self.in_thread(lambda: self.redeem(code, verifier), answers)
        with transaction.atomic():
            # The code's row: a redemption takes it before it issues anything.
            Grant.objects.select_for_update().get(code=code)
            first.start()
            self.wait_until_waiting(1, first, "the first redemption")
            second.start()
            self.wait_until_waiting(2, second, "the second redemption")
        first.join(timeout=120)
        second.join(timeout=120)
        statuses = sorted(answer.status_code for answer in answers)
        self.assertIn(statuses, ([200, 400], [400, 400]), [answer.text for answer in answers])
        for answer in answers:
            if answer.status_code == 400:
                self.assertEqual(answer.json()["error"], "invalid_grant")
            else:  # the first redemption's tokens, revoked by the second
                self.assertEqual(
                    call_tool(self.mcp_url, answer.json()["access_token"], "field_notes_search", {}).status_code, 401
                )
        self.assertEqual(self.live_tokens(), (0, 0))


@unittest.skipUnless(on_postgres(), "racing requests: SQLite runs one write transaction at a time")
class RacingRefreshesTest(IssuanceTestCase):
    ROUNDS = 100
    RACERS = 10

    def fresh_pair(self) -> str:
        """A live access and refresh token of a new family, as a code's exchange leaves them; the
        raw refresh token."""
        raw = secrets.token_urlsafe(32)
        access = AccessToken(
            user=self.alice,
            application=self.application,
            expires=timezone.now() + dt.timedelta(hours=1),
            scope="notes:read notes:write",
            resource=[settings.CODEX_RESOURCE_URL],
        )
        set_token_value(access, secrets.token_urlsafe(32))
        access.save()
        refresh_token = RefreshToken(
            user=self.alice, application=self.application, access_token=access, token_family=uuid.uuid4()
        )
        set_token_value(refresh_token, raw)
        refresh_token.save()
        return raw

    def test_a_refresh_token_is_exchanged_at_most_once_in_1000_racing_attempts(self) -> None:
        # One HTTP client per racer, kept across rounds: each round costs its requests, not connections.
        clients = [httpx2.Client(timeout=120) for _ in range(self.RACERS)]
        for client in clients:
            self.addCleanup(client.close)
        body = {"grant_type": "refresh_token", "client_id": self.client_id}
        for _ in range(self.ROUNDS):
            raw = self.fresh_pair()
            barrier = threading.Barrier(self.RACERS)
            answers: list[httpx2.Response] = []

            def race(client: httpx2.Client, barrier: threading.Barrier = barrier, raw: str = raw) -> httpx2.Response:
                barrier.wait(timeout=60)
                return client.post(self.base + "/o/token/", data={**body, "refresh_token": raw})

            racers = [self.in_thread(lambda client=client: race(client), answers) for client in clients]
            for racer in racers:
                racer.start()
            for racer in racers:
                racer.join(timeout=120)
            statuses = Counter(answer.status_code for answer in answers)
            # One exchange at most. None at all when a racer that arrived after the rotation
            # counted as reuse and revoked the family before the winner's answer was made: the
            # winner is told so (invalid_grant), never handed the dead pair.
            self.assertLessEqual(statuses[200], 1, [a.text for a in answers])
            self.assertEqual(statuses[200] + statuses[400], self.RACERS, [a.text for a in answers])
            self.assertEqual({a.json()["error"] for a in answers if a.status_code == 400}, {"invalid_grant"})
            spent = RefreshToken.objects.get(token_checksum=token_checksum(raw))
            self.assertIsNotNone(spent.revoked)
            self.assertLessEqual(AccessToken.objects.filter(source_refresh_token=spent).count(), 1)
            family = RefreshToken.objects.filter(token_family=spent.token_family, revoked__isnull=True)
            self.assertLessEqual(family.count(), statuses[200])  # the winner's pair, unless revoked as above


class ReadBackTest(IssuanceTestCase):
    """DOT's token view reads back the access token it has just issued, after the grant's
    transaction: a revocation that commits in between must not make that a 500."""

    def revoke_each_new_token_once_committed(self) -> None:
        def revoke(sender, instance, created, **kwargs) -> None:
            if created and instance.application_id == self.application.pk:
                # A revocation that commits right after the issuance, before the answer is made.
                transaction.on_commit(lambda: AccessToken.objects.filter(pk=instance.pk).delete())

        post_save.connect(revoke, sender=AccessToken, weak=False, dispatch_uid="test_token_races.revoke")
        self.addCleanup(post_save.disconnect, sender=AccessToken, dispatch_uid="test_token_races.revoke")

    def test_a_code_whose_tokens_are_revoked_as_they_are_issued_gets_invalid_grant(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        self.revoke_each_new_token_once_committed()
        self.assertInvalidGrant(self.redeem(code, verifier))

    def test_a_refresh_whose_tokens_are_revoked_as_they_are_issued_gets_invalid_grant(self) -> None:
        issued = self.tokens()
        self.revoke_each_new_token_once_committed()
        self.assertInvalidGrant(self.refresh(issued["refresh_token"]))


class CodeReplayTest(IssuanceTestCase):
    """OAuth 2.1 §4.1.3 (RFC 6749 §4.1.2): a code used twice is refused, and the tokens its first
    use issued are revoked: the access token and every refresh token descended from it."""

    def test_a_replayed_code_is_refused_and_revokes_what_its_first_use_issued(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        first = self.redeem(code, verifier).json()
        rotated = self.refresh(first["refresh_token"]).json()
        other_sign_in = self.tokens()  # the same client and person, by another code: not the replayed one's
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            self.assertInvalidGrant(self.redeem(code, verifier))
        [line] = [record for record in logs.records if record.event == "token.revoked"]
        self.assertEqual((line.by, line.user_id, line.client_id), ("code_replay", self.alice.pk, self.client_id))
        self.assertEqual((line.access_tokens, line.refresh_tokens), (1, 2))
        self.assertEqual(call_tool(self.mcp_url, rotated["access_token"], "field_notes_search", {}).status_code, 401)
        self.assertInvalidGrant(self.refresh(rotated["refresh_token"]))
        self.assertEqual(
            call_tool(self.mcp_url, other_sign_in["access_token"], "field_notes_search", {}).status_code, 200
        )
        self.assertEqual(self.refresh(other_sign_in["refresh_token"]).status_code, 200)
        # Once is enough: a third use is refused and revokes nothing more.
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            self.assertInvalidGrant(self.redeem(code, verifier))
            self.assertEqual(self.refresh(self.tokens()["refresh_token"]).status_code, 200)
        self.assertNotIn("token.revoked", [record.event for record in logs.records])

    def test_a_code_presented_by_another_client_revokes_nothing(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        first = self.redeem(code, verifier).json()
        Application = get_application_model()
        other = Application.objects.create(
            name="another client",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )
        self.assertInvalidGrant(exchange_code(self.base, other.client_id, code, verifier))
        self.assertEqual(call_tool(self.mcp_url, first["access_token"], "field_notes_search", {}).status_code, 200)

    def test_what_a_code_issued_is_kept_for_its_lifetime_and_the_margin_then_a_use_is_only_refused(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        expires = Grant.objects.get(code=code).expires
        first = self.redeem(code, verifier).json()
        record = CodeRedemption.objects.get()
        self.assertEqual(record.expires_at, expires + exchange.REPLAY_MARGIN)
        self.assertNotIn(code, str(record.__dict__))  # only its hash is kept
        CodeRedemption.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
        self.assertInvalidGrant(self.redeem(code, verifier))
        self.assertEqual(call_tool(self.mcp_url, first["access_token"], "field_notes_search", {}).status_code, 200)
        self.tokens()  # the next redemption sweeps the record that no longer matters
        self.assertFalse(CodeRedemption.objects.filter(pk=record.pk).exists())
        self.assertEqual(CodeRedemption.objects.count(), 1)
