"""One-use JWTs (``authserver.core.replay``): the first use of (issuer, jti) is accepted, every later
one refused while the JWT lives, even when two arrive at once; an expired one's row is swept and
its jti may come again; a store that cannot be written refuses."""

import datetime as dt
import threading

from django.db import DatabaseError, close_old_connections, connection, transaction
from django.test import TestCase, TransactionTestCase
from django.utils import timezone

from authserver.core import replay
from authserver.models import SpentJti


def later(seconds: int) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)


class SpendTest(TestCase):
    def spend(self, jti: str = "j-1", *, issuer: str = "https://client.example/doc.json", until=None) -> bool:
        return replay.spend(namespace=replay.CLIENT_ASSERTION, issuer=issuer, jti=jti, expires_at=until or later(300))

    def test_the_first_use_is_accepted_and_every_later_one_refused(self) -> None:
        self.assertTrue(self.spend())
        self.assertFalse(self.spend())
        self.assertFalse(self.spend())

    def test_the_same_jti_of_another_issuer_or_namespace_is_its_own(self) -> None:
        self.assertTrue(self.spend())
        self.assertTrue(self.spend(issuer="https://other.example/doc.json"))
        self.assertTrue(
            replay.spend(namespace="id-jag", issuer="https://client.example/doc.json", jti="j-1", expires_at=later(300))
        )

    def test_an_expired_use_is_swept_and_its_jti_may_come_again(self) -> None:
        self.assertTrue(self.spend("old", until=later(-1)))
        for number in range(3):
            self.assertTrue(self.spend(f"stale-{number}", until=later(-1)))
        self.assertTrue(self.spend("old"))
        self.assertEqual(SpentJti.objects.count(), 1)  # the stale ones were swept

    def test_a_store_that_cannot_be_written_refuses(self) -> None:
        trigger = {
            "sqlite": [
                "CREATE TRIGGER spent_refuses BEFORE INSERT ON authserver_spentjti "
                "BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END"
            ],
            "postgresql": [
                "CREATE FUNCTION spent_refuses() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'the database refuses writes'; END $$",
                "CREATE TRIGGER spent_refuses BEFORE INSERT ON authserver_spentjti "
                "FOR EACH ROW EXECUTE FUNCTION spent_refuses()",
            ],
        }[connection.vendor]
        with connection.cursor() as cursor:
            for statement in trigger:
                cursor.execute(statement)
        with self.assertRaises(DatabaseError), transaction.atomic():
            self.spend("never")  # an outage, never True


class ConcurrentSpendTest(TransactionTestCase):
    def test_of_many_simultaneous_uses_exactly_one_is_first(self) -> None:
        start = threading.Barrier(8)
        results: list[bool] = []

        def use() -> None:
            try:
                start.wait()
                results.append(
                    replay.spend(namespace=replay.CLIENT_ASSERTION, issuer="c", jti="same", expires_at=later(300))
                )
            finally:
                close_old_connections()
                connection.close()

        threads = [threading.Thread(target=use) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(sorted(results), [False] * 7 + [True])
