"""A Django request (a page, an OAuth endpoint, /healthz) closes its database connection
when it finishes, even with persistent connections on: under ASGI its thread is never
used again, so a kept connection would only wait, idle, for the garbage collector."""

import threading
import time

import httpx2
from django.db import connections
from django.db.backends.signals import connection_created

from tests.live import LiveServerTestCase


class RequestConnectionsTest(LiveServerTestCase):
    def setUp(self) -> None:
        # What production runs with (the test runner turns persistent connections off).
        settings_dict = connections.settings["default"]
        saved = settings_dict["CONN_MAX_AGE"]
        settings_dict["CONN_MAX_AGE"] = 60
        self.addCleanup(settings_dict.__setitem__, "CONN_MAX_AGE", saved)
        self.opened: list = []
        main = threading.current_thread()

        def record(sender, connection, **kwargs) -> None:
            if threading.current_thread() is not main:
                self.opened.append(connection)

        connection_created.connect(record, weak=False)
        self.addCleanup(connection_created.disconnect, record)

    def test_a_health_check_closes_its_connection_when_it_finishes(self) -> None:
        for _ in range(3):
            response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
            self.assertEqual(response.status_code, 200)
        self.assertTrue(self.opened)
        self.assert_every_connection_closed()

    def test_an_oauth_endpoint_closes_its_connection_too(self) -> None:
        # The authorization endpoint looks the client up before anything else.
        response = httpx2.get(
            self.live.base_url + "/o/authorize/?client_id=no-such-client&response_type=code", timeout=10
        )
        self.assertLess(response.status_code, 500)
        self.assertTrue(self.opened)
        self.assert_every_connection_closed()

    def assert_every_connection_closed(self) -> None:
        # request_finished runs just after the response is sent; wait for it (bounded).
        deadline = time.monotonic() + 10
        while any(wrapper.connection is not None for wrapper in self.opened) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual([wrapper for wrapper in self.opened if wrapper.connection is not None], [])
