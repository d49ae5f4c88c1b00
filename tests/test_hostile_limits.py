"""Limits an attacker can neither dodge nor turn against others.

- Rotating through the addresses of one IPv6 /64 (which one subscriber holds whole) gains nothing:
  every per-address limit and record counts the /64 (``common.ratelimit.network_of``).
- A full server-wide cap on waiting registrations refuses nobody new: the oldest make room.
- An office's people signing in together from one address are not a flood, while guessing
  passwords across many accounts from that address is still throttled.
- A client whose address the server was not told, or was told something that is no address,
  counts as one client, "unknown", at every door (``common.ratelimit``): it cannot dodge a limit
  by writing a new name, and the oauthlib side counts it as the Django side does.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, SimpleTestCase, TestCase, override_settings
from oauth2_provider.models import get_application_model
from oauthlib.common import Request as OAuthlibRequest

from authserver.models import PendingRegistration
from tests.clocks import SignInClock, one_rate_window
from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import REDIRECT_URI, pkce_pair

Application = get_application_model()
ROOT = Path(__file__).resolve().parent.parent
ONE_64 = [f"2001:db8:1:2::{host:x}" for host in range(1, 12)] + ["2001:db8:1:2:ffff:ffff:ffff:ffff"]


def register(address: str):
    return Client(REMOTE_ADDR=address).post(
        "/o/register/",
        json.dumps({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
    )


def authorize(address: str, client_id: str):
    return Client(REMOTE_ADDR=address).get(
        "/o/authorize/",
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": pkce_pair()[1],
            "code_challenge_method": "S256",
        },
    )


class NetworkOfTest(SimpleTestCase):
    def test_an_ipv6_address_counts_as_its_64_and_an_ipv4_one_as_itself(self) -> None:
        from common.ratelimit import network_of

        self.assertEqual({network_of(address) for address in ONE_64}, {"2001:db8:1:2::/64"})
        self.assertEqual(network_of("2001:db8:1:3::1"), "2001:db8:1:3::/64")
        self.assertEqual(network_of("203.0.113.9"), "203.0.113.9")
        self.assertEqual(network_of("::ffff:203.0.113.9"), "203.0.113.9")
        self.assertEqual(network_of("unknown"), "unknown")


class UnknownPeerTest(TestCase):
    @override_settings(CODEX_DCR_RATE_LIMIT=2)
    def test_addresses_that_are_no_address_count_as_one_client(self) -> None:
        # uvicorn names no peer on a Unix socket, and applies whatever X-Forwarded-For a
        # trusted proxy passes on: none of these is a network of its own.
        with one_rate_window():
            statuses = [register(address).status_code for address in ("", "garbage-1", "garbage-2", "unix:/run/x")]
        self.assertEqual(statuses, [201, 201, 429, 429])
        self.assertEqual(set(PendingRegistration.objects.values_list("address", flat=True)), {"unknown"})

    def test_a_django_request_and_the_oauthlib_request_dot_makes_of_it_have_one_network(self) -> None:
        from oauth2_provider.oauth2_backends import get_oauthlib_core

        from common.ratelimit import client_network, oauthlib_client_network

        core = get_oauthlib_core()
        for address in ("203.0.113.9", "::ffff:203.0.113.9", "2001:db8:1:2::7", "", "garbage", None):
            with self.subTest(address=address):
                request = RequestFactory().post("/o/token/", {"grant_type": "client_credentials"})
                if address is None:
                    del request.META["REMOTE_ADDR"]
                else:
                    request.META["REMOTE_ADDR"] = address
                as_dot_hands_it = OAuthlibRequest(
                    request.build_absolute_uri(), "POST", "", core.extract_headers(request)
                )
                self.assertEqual(oauthlib_client_network(as_dot_hands_it), client_network(request))


class IPv6RotationTest(TestCase):
    """Each limit, met from a dozen addresses of one /64 as if from one."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    @override_settings(CODEX_DCR_RATE_LIMIT=3)
    def test_the_registration_rate(self) -> None:
        with one_rate_window():
            statuses = [register(address).status_code for address in ONE_64[:4]]
            self.assertEqual(statuses, [201, 201, 201, 429])
            self.assertEqual(register(ONE_64[-1]).status_code, 429)
            self.assertEqual(register("2001:db8:1:3::1").status_code, 201)  # the next /64 is someone else

    @override_settings(CODEX_DCR_RATE_LIMIT=1_000, CODEX_DCR_PENDING_PER_ADDRESS=3)
    def test_the_waiting_registrations_per_network(self) -> None:
        with one_rate_window():
            answers = [register(address) for address in ONE_64[:5]]
        self.assertEqual([answer.status_code for answer in answers], [201, 201, 201, 429, 429])
        self.assertIn("from this network", answers[-1].json()["error_description"])
        self.assertEqual(set(PendingRegistration.objects.values_list("address", flat=True)), {"2001:db8:1:2::/64"})

    @override_settings(CODEX_CIMD_RATE_LIMIT=2)
    def test_the_metadata_document_fetch_rate(self) -> None:
        with one_rate_window():
            statuses = [
                authorize(address, f"{self.documents.origin}/unknown/{number}.json").status_code
                for number, address in enumerate(ONE_64[:4])
            ]
        self.assertEqual(statuses[2:], [429, 429])
        self.assertEqual(sum(self.documents.fetched.values()), 2)

    def test_failed_sign_ins_per_network(self) -> None:
        clock = SignInClock()
        patcher = clock.patch()
        patcher.start()
        self.addCleanup(patcher.stop)
        for number in range(11):
            get_user_model().objects.create_user(f"person-{number}", password="right-password")
        checked = 0
        for number, address in enumerate(ONE_64[:11]):
            answer = Client(REMOTE_ADDR=address).post(
                "/accounts/login/", {"login": f"person-{number}", "password": "wrong-password"}
            )
            checked += "did not match" in answer.content.decode()
        self.assertEqual(checked, settings.CODEX_SIGNIN_FAILURES_PER_ADDRESS)


@override_settings(
    CODEX_DCR_RATE_LIMIT=1_000, CODEX_CIMD_RATE_LIMIT=1_000, CODEX_DCR_PENDING_PER_ADDRESS=3, CODEX_DCR_PENDING_MAX=5
)
class FullServerCapTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def test_a_full_cap_refuses_no_new_registration_and_the_oldest_make_room(self) -> None:
        with one_rate_window():
            flood = [register(f"2001:db8:{network:x}::1") for network in range(1, 6)]
            self.assertEqual([answer.status_code for answer in flood], [201] * 5)
            newcomer = register("203.0.113.77")
            self.assertEqual(newcomer.status_code, 201, newcomer.content)
            client_id = f"{self.documents.origin}/agents/newcomer.json"
            self.documents.documents["/agents/newcomer.json"] = {
                "client_id": client_id,
                "redirect_uris": [REDIRECT_URI],
            }
            document_page = authorize("203.0.113.78", client_id)
        self.assertEqual(document_page.status_code, 302, document_page.content[:500])  # on to sign in
        waiting = set(Application.objects.values_list("client_id", flat=True))
        self.assertEqual(len(waiting), 5)
        self.assertIn(newcomer.json()["client_id"], waiting)
        self.assertIn(client_id, waiting)
        self.assertNotIn(flood[0].json()["client_id"], waiting)
        self.assertNotIn(flood[1].json()["client_id"], waiting)


class OfficeMorningTest(TestCase):
    OFFICE = "203.0.113.100"
    PEOPLE = 100

    def setUp(self) -> None:
        clock = SignInClock()  # every sign-in of the test within one minute
        patcher = clock.patch()
        patcher.start()
        self.addCleanup(patcher.stop)
        for number in range(self.PEOPLE):
            get_user_model().objects.create_user(f"colleague-{number}", password=f"colleague-{number}-password")

    def test_an_office_signing_in_together_from_one_address_all_get_in(self) -> None:
        refused = [
            number
            for number in range(self.PEOPLE)
            if Client(REMOTE_ADDR=self.OFFICE)
            .post("/accounts/login/", {"login": f"colleague-{number}", "password": f"colleague-{number}-password"})
            .status_code
            != 302
        ]
        self.assertEqual(refused, [], f"{len(refused)} of {self.PEOPLE} colleagues were refused")

    def test_guessing_across_the_offices_accounts_from_its_address_is_still_throttled(self) -> None:
        answers = [
            Client(REMOTE_ADDR=self.OFFICE).post(
                "/accounts/login/", {"login": f"colleague-{number}", "password": "Summer2026!"}
            )
            for number in range(self.PEOPLE)
        ]
        checked = sum("did not match" in answer.content.decode() for answer in answers)
        self.assertEqual(checked, settings.CODEX_SIGNIN_FAILURES_PER_ADDRESS)


class SignInsPerAddressSettingTest(SimpleTestCase):
    def test_the_successful_sign_ins_per_address_are_a_setting(self) -> None:
        environment = {key: value for key, value in os.environ.items() if key != "DJANGO_DEBUG"}
        result = subprocess.run(
            [sys.executable, "-c", "import codex_site.settings as s; print(s.ACCOUNT_RATE_LIMITS['login'])"],
            cwd=ROOT,
            env={**environment, "CODEX_SIGNINS_PER_ADDRESS": "500"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(result.stdout.strip(), "500/m/ip", result.stderr)
