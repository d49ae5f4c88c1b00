"""Security state that no stranger's requests can wipe, as an attacker tries it: throttle a
sign-in, a second factor and a client assertion; flood the server with every kind of anonymous
request that leaves an entry behind (token requests naming unknown metadata documents, failed
sign-ins for made-up accounts, authorization requests for unknown documents, dynamic
registrations, each from an address of its own); then try the throttled actions and the replays
again. Each stays refused. The shared cache's row limit is lowered, so that the flood is many
times what it holds (with Django's culling, a few hundred such requests wiped it).

And when that state cannot be written, the action is refused, never let through.

And what strangers can put there is bounded per stranger: every kind of anonymous request that
leaves a row, sent from many IPv6 /64s, each more often than its limits allow, leaves at most a
network's bound of rows per network (a row per counter kind, and one per failed sign-in its own
limit let through), whatever it sends; past the table's MAX_ENTRIES nothing is evicted, nothing
refused, and the log says so."""

import base64
import datetime as dt
import hashlib
import secrets
import uuid
from collections import Counter

from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal import auth as totp_auth
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, TestCase, override_settings
from django.utils import timezone
from oauth2_provider.models import get_application_model

from authserver.clients import key_sets
from authserver.models import ClientKeys
from common import durable_cache, ratelimit
from tests.clocks import SignInClock, one_rate_window
from tests.hosted_clients import ASSERTION_TYPE, ChatGPTLike, DocumentsServer
from tests.oauth_helpers import REDIRECT_URI
from tests.totp import totp

FLOOD = 240
# The shared cache's row limit, far below the flood (Django's default is 300).
SMALL_CACHE = {**settings.CACHES, "default": {**settings.CACHES["default"], "OPTIONS": {"MAX_ENTRIES": 60}}}
TOTP_STEP = 3600  # a code and its used-mark last an hour: the test never crosses a step


def flood(count: int = FLOOD) -> None:
    """Anonymous requests of every kind that leaves something behind, each from an address of its own."""
    for number in range(count):
        address = f"198.18.{number // 250}.{number % 250 + 1}"
        client = Client(REMOTE_ADDR=address)
        kind = number % 4
        if kind == 0:  # a token request naming a metadata document nobody knows
            client.post(
                "/o/token/",
                {
                    "grant_type": "authorization_code",
                    "code": "c",
                    "client_id": f"https://127.0.0.1:9/flood/{number}.json",
                    "redirect_uri": REDIRECT_URI,
                    "code_verifier": "v" * 43,
                },
            )
        elif kind == 1:  # a failed sign-in for a made-up account
            client.post("/accounts/login/", {"login": f"nobody-{number}", "password": "guess"})
        elif kind == 2:  # an authorization request for a document nobody knows
            client.get(
                "/o/authorize/",
                {
                    "response_type": "code",
                    "client_id": f"https://127.0.0.1:9/flood/{number}.json",
                    "redirect_uri": REDIRECT_URI,
                    "code_challenge": "a" * 43,
                    "code_challenge_method": "S256",
                },
            )
        else:  # a dynamic registration
            client.post(
                "/o/register/",
                {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"},
                content_type="application/json",
            )


def alert(response) -> str:
    return response.content.decode(errors="replace")


@override_settings(
    CACHES=SMALL_CACHE,
    MFA_TOTP_PERIOD=TOTP_STEP,
    CODEX_DCR_RATE_LIMIT=1_000_000,
    CODEX_CIMD_RATE_LIMIT=1_000_000,
    CODEX_DCR_PENDING_PER_ADDRESS=1_000_000,
    CODEX_DCR_PENDING_MAX=1_000_000,
)
class FloodThenRetryTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        cls.chatgpt = ChatGPTLike(cls.documents)

    def setUp(self) -> None:
        self.clock = SignInClock()
        for patcher in (self.clock.patch(), self.clock.patch(totp_auth)):
            patcher.start()
            self.addCleanup(patcher.stop)
        self.users = get_user_model().objects

    def sign_in(self, client: Client, login: str, password: str):
        return client.post("/accounts/login/", {"login": login, "password": password})

    def test_after_a_flood_every_throttle_and_every_spent_mark_holds(self) -> None:
        throttled_sign_in = self.throttle_a_sign_in()
        throttled_second_factor, code = self.throttle_a_second_factor()
        used_code = self.use_a_second_factor_code()
        spent_assertion = self.spend_a_client_assertion()

        flood()

        with self.subTest("a throttled sign-in"):
            answer = throttled_sign_in()
            self.assertNotEqual(answer.status_code, 302, "the flood wiped the account's throttle")
            self.assertIn("try again in", alert(answer))
        with self.subTest("a throttled second factor"):
            answer = throttled_second_factor.post("/accounts/2fa/authenticate/", {"code": code})
            self.assertEqual(answer.status_code, 200, "the flood wiped the second factor's throttle")
            self.assertNotIn("_auth_user_id", throttled_second_factor.session)
        with self.subTest("a used second-factor code"):
            client, code = used_code()
            answer = client.post("/accounts/2fa/authenticate/", {"code": code})
            self.assertEqual(answer.status_code, 200, "the flood wiped the mark of a used code: it signed in again")
            self.assertNotIn("_auth_user_id", client.session)
        with self.subTest("a spent client assertion"):
            replayed = spent_assertion()
            self.assertEqual(replayed.status_code, 401, "the flood wiped the spent assertion: it authenticated again")
            self.assertIn("used before", replayed.json()["error_description"])

    def throttle_a_sign_in(self):
        self.users.create_user("victim", password="victim-password")
        attacker = Client(REMOTE_ADDR="203.0.113.7")
        for guess in range(5):
            self.assertIn("did not match", alert(self.sign_in(attacker, "victim", f"guess-{guess}")))
        right = self.sign_in(Client(REMOTE_ADDR="203.0.113.8"), "victim", "victim-password")
        self.assertIn("try again in", alert(right))
        return lambda: self.sign_in(Client(REMOTE_ADDR="203.0.113.9"), "victim", "victim-password")

    def second_factor_page(self, user) -> Client:
        client = Client(REMOTE_ADDR="203.0.113.20")
        answer = self.sign_in(client, user.username, f"{user.username}-password")
        self.assertEqual(answer["Location"], "/accounts/2fa/authenticate/")
        return client

    def user_with_totp(self, username: str):
        user = self.users.create_user(username, password=f"{username}-password")
        secret = base64.b32encode(secrets.token_bytes(20)).decode()
        Authenticator.objects.create(user=user, type=Authenticator.Type.TOTP, data={"secret": secret})
        return user, totp(secret, self.clock.now, step=TOTP_STEP)

    def throttle_a_second_factor(self) -> tuple[Client, str]:
        user, code = self.user_with_totp("tess")
        client = self.second_factor_page(user)
        wrong = "000000" if code != "000000" else "111111"
        for _ in range(5):
            client.post("/accounts/2fa/authenticate/", {"code": wrong})
        self.assertEqual(client.post("/accounts/2fa/authenticate/", {"code": code}).status_code, 200)
        return client, code

    def use_a_second_factor_code(self):
        user, code = self.user_with_totp("uma")
        first = self.second_factor_page(user)
        self.assertEqual(first.post("/accounts/2fa/authenticate/", {"code": code}).status_code, 302)
        return lambda: (self.second_factor_page(user), code)

    def spend_a_client_assertion(self):
        Application = get_application_model()
        Application.objects.create(
            client_id=self.chatgpt.client_id,
            name="ChatGPT",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(
            client_id=self.chatgpt.client_id, jwks_uri=self.chatgpt.jwks_uri, signing_algorithm="RS256"
        )
        request = {
            "grant_type": "authorization_code",
            "code": "no-such-code",
            "redirect_uri": REDIRECT_URI,
            "code_verifier": "v" * 43,
            "client_id": self.chatgpt.client_id,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self.chatgpt.assertion(settings.CODEX_ISSUER_URL, jti=str(uuid.uuid4())),
        }
        first = Client().post("/o/token/", request)
        self.assertEqual(first.json()["error"], "invalid_grant", first.content)  # authenticated; the code is bad
        self.assertEqual(Client().post("/o/token/", request).status_code, 401)
        return lambda: Client().post("/o/token/", request)


REFUSE_UPDATES = {
    "sqlite": [
        "CREATE TRIGGER codex_cache_keeps BEFORE UPDATE ON codex_cache "
        "BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END",
    ],
    "postgresql": [
        "CREATE FUNCTION codex_cache_keeps() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the database refuses writes'; END $$",
        "CREATE TRIGGER codex_cache_keeps BEFORE UPDATE ON codex_cache "
        "FOR EACH ROW EXECUTE FUNCTION codex_cache_keeps()",
    ],
}


class ThrottleThatCannotBeWrittenTest(TestCase):
    """A throttle counter the database will not update (a full disk, a refused write): Django's
    database cache would drop the write silently and count nothing, letting every guess through."""

    def test_no_guess_is_checked_once_the_counter_cannot_be_written(self) -> None:
        clock = SignInClock()
        patcher = clock.patch()
        patcher.start()
        self.addCleanup(patcher.stop)
        get_user_model().objects.create_user("victim", password="victim-password")
        attacker = Client(REMOTE_ADDR="203.0.113.30")
        self.assertIn("did not match", alert(attacker.post("/accounts/login/", {"login": "victim", "password": "x"})))
        with connection.cursor() as cursor:
            for statement in REFUSE_UPDATES[connection.vendor]:
                cursor.execute(statement)
        answers = [
            attacker.post("/accounts/login/", {"login": "victim", "password": f"guess-{guess}"}) for guess in range(10)
        ]
        checked = [answer for answer in answers if "did not match" in alert(answer)]
        self.assertEqual(checked, [], f"{len(checked)} of 10 guesses were checked with an uncounted throttle")
        self.assertEqual({answer.status_code for answer in answers}, {503})
        signed_in = attacker.post("/accounts/login/", {"login": "victim", "password": "victim-password"})
        self.assertEqual(signed_in.status_code, 503)


NETWORKS = 20
MAX_ENTRIES = 100  # the flood's rows are several times this
SIGN_INS, DOCUMENTS, REGISTRATIONS, TOKEN_REQUESTS = 15, 5, 5, 5  # each more than a network's limits allow


def cache_keys() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT cache_key FROM codex_cache")
        return [row[0] for row in cursor.fetchall()]


def kind_of(key: str, network: str, logins: set[str]) -> str:
    """Which state a row of the default cache is, as this test's flood made it."""
    if key.endswith(f"ip:{network}") or f":{network}:" in key:
        return key.split(":")[5] if ":allauth:" in key else key.split(":")[3]
    if key.rsplit(":", 1)[-1] in logins:
        return "failed sign-in of a made-up account"
    return key.split(":")[2]


@override_settings(
    CACHES={**settings.CACHES, "default": {**settings.CACHES["default"], "OPTIONS": {"MAX_ENTRIES": MAX_ENTRIES}}},
    CODEX_DCR_PENDING_MAX=1_000_000,
    CODEX_DCR_PENDING_PER_ADDRESS=1_000_000,
)
class RowsPerNetworkTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        cls.chatgpt = ChatGPTLike(cls.documents)

    def setUp(self) -> None:
        for patcher in (SignInClock().patch(), one_rate_window()):
            patcher.start()
            self.addCleanup(patcher.stop)
        Application = get_application_model()
        Application.objects.create(
            client_id=self.chatgpt.client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(
            client_id=self.chatgpt.client_id, jwks_uri=self.chatgpt.jwks_uri, signing_algorithm="RS256"
        )

    def flood_from(self, number: int) -> tuple[str, set[str]]:
        """Every kind of anonymous request that leaves a row, from one /64: its network, and the
        keys of the made-up accounts it tried."""
        address = f"2001:db8:{number:x}:{number:x}::1"
        client = Client(REMOTE_ADDR=address)
        logins = set()
        for attempt in range(SIGN_INS):
            login = f"nobody-{number}-{attempt}"
            logins.add(hashlib.sha256(login.encode()).hexdigest())
            client.post("/accounts/login/", {"login": login, "password": "guess"})
        for attempt in range(DOCUMENTS):
            client.get(
                "/o/authorize/",
                {
                    "response_type": "code",
                    "client_id": f"https://127.0.0.1:9/flood/{number}-{attempt}.json",
                    "redirect_uri": REDIRECT_URI,
                    "code_challenge": "a" * 43,
                    "code_challenge_method": "S256",
                },
            )
        for _ in range(REGISTRATIONS):
            client.post(
                "/o/register/",
                {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"},
                content_type="application/json",
            )
        for attempt in range(TOKEN_REQUESTS):
            # A known client's assertion (its key set fetched once, for everyone), one naming a key
            # nobody has (the key set fetched again at most once a minute), one naming an unknown
            # document (nothing fetched, nothing kept).
            kid = "rotated-away" if attempt % 2 else None
            client.post(
                "/o/token/",
                {
                    "grant_type": "authorization_code",
                    "code": "c",
                    "redirect_uri": REDIRECT_URI,
                    "code_verifier": "v" * 43,
                    "client_id": self.chatgpt.client_id,
                    "client_assertion_type": ASSERTION_TYPE,
                    "client_assertion": self.chatgpt.assertion(
                        settings.CODEX_ISSUER_URL, jti=str(uuid.uuid4()), **({"kid": kid} if kid else {})
                    ),
                },
            )
            client.post(
                "/o/token/",
                {"grant_type": "authorization_code", "code": "c", "client_id": f"https://127.0.0.1:9/t/{number}.json"},
            )
        return str(ratelimit.network_of(address)), logins

    def test_a_key_set_is_kept_ten_minutes_at_most_whatever_its_cache_control_says(self) -> None:
        # A network's documents can each name a key set of their own; kept for the day their
        # Cache-Control asks, each would outlive the client made from it by hours.
        self.documents.cache_control = "max-age=86400"
        self.addCleanup(setattr, self.documents, "cache_control", "max-age=600")
        answer = Client(REMOTE_ADDR="2001:db8:5:5::1").post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": "c",
                "redirect_uri": REDIRECT_URI,
                "code_verifier": "v" * 43,
                "client_id": self.chatgpt.client_id,
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": self.chatgpt.assertion(settings.CODEX_ISSUER_URL, jti=str(uuid.uuid4())),
            },
        )
        self.assertEqual(answer.json().get("error"), "invalid_grant", answer.content)  # authenticated
        with connection.cursor() as cursor:
            cursor.execute("SELECT expires FROM codex_cache WHERE cache_key LIKE %s", ["%client-jwks:%"])
            [(expires,)] = cursor.fetchall()
        if isinstance(expires, str):  # SQLite's text, in UTC
            expires = dt.datetime.fromisoformat(expires)
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=dt.UTC)
        self.assertLessEqual(expires, timezone.now() + dt.timedelta(seconds=key_sets.KEY_SET_SECONDS + 1))

    def test_a_flood_from_many_networks_leaves_each_its_bound_of_rows_and_refuses_nobody(self) -> None:
        bound = 4 + settings.CODEX_SIGNIN_FAILURES_PER_ADDRESS  # within one minute (the clocks stand still)
        before = set(cache_keys())
        measured: Counter[str] = Counter()
        with self.assertLogs("common.durable_cache", "WARNING") as logs:
            for number in range(1, NETWORKS + 1):
                keys_before = set(cache_keys())
                network, logins = self.flood_from(number)
                made = set(cache_keys()) - keys_before
                kinds = Counter(kind_of(key, network, logins) for key in made)
                measured.update(kinds)
                per_network = sum(count for kind, count in kinds.items() if not kind.startswith("client-jwks"))
                self.assertLessEqual(per_network, bound, f"network {network} left {kinds}")
                durable_cache.forget_sweeps()  # each network's first write sweeps, and counts
        flood_rows = set(cache_keys()) - before
        self.assertGreater(len(flood_rows), MAX_ENTRIES)
        # Every row of the flood is still there: nothing live was evicted past the limit.
        self.assertEqual(len(flood_rows), sum(measured.values()))
        self.assertTrue(any("past its MAX_ENTRIES" in line for line in logs.output))
        print(f"\nrows of the default cache left by {NETWORKS} networks' floods (per network: at most {bound}):")
        for kind, count in sorted(measured.items()):
            print(f"  {kind:<40} {count:>5}  ({count / NETWORKS:.2f} per network)")
        # A network new to the server is served as before: nothing is refused for the full table.
        newcomer = Client(REMOTE_ADDR="2001:db8:ffff:1::1")
        registered = newcomer.post(
            "/o/register/",
            {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"},
            content_type="application/json",
        )
        self.assertEqual(registered.status_code, 201, registered.content)
        get_user_model().objects.create_user("person", password="person-password")
        signed_in = newcomer.post("/accounts/login/", {"login": "person", "password": "person-password"})
        self.assertEqual(signed_in.status_code, 302, signed_in.content[:300])
