"""/metrics: who may read it, what it counts after known calls over real HTTP, that no label
carries what a person or client wrote, and that several worker processes add up."""

import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

import httpx2
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.test import Client, SimpleTestCase, TestCase, override_settings
from oauth2_provider.models import get_access_token_model
from prometheus_client.parser import text_string_to_metric_families

import codex_metrics
from codex_metrics import exposition
from codex_site.serve import metrics_dir, worker_count
from mcp_endpoint.auth import token_checksum
from notebook.models import Codex
from tests.http_client import call_tool, post, rpc_body
from tests.live import LiveServerTestCase
from tests.served import free_port, migrate_and_mint, start_serve, stop, wait_until_healthy
from tests.test_mcp_errors import failing

ROOT = Path(__file__).resolve().parent.parent
AccessToken = get_access_token_model()
METRICS_TOKEN = "metrics-token-" + "s" * 24


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of an exposition, by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


class MetricsAccessTest(TestCase):
    """Not public: loopback (or the configured networks) or the bearer token; else 404."""

    def status(self, address: str, **headers: str) -> int:
        return Client(REMOTE_ADDR=address).get("/metrics", headers=headers).status_code

    def test_loopback_clients_may_scrape_by_default(self) -> None:
        answer = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
        self.assertEqual(answer.status_code, 200)
        self.assertEqual(answer["Content-Type"], exposition.CONTENT_TYPE_LATEST)
        self.assertIn(b"# TYPE codex_tool_calls_total counter", answer.content)
        self.assertEqual(self.status("::1"), 200)
        self.assertEqual(self.status("::ffff:127.0.0.1"), 200)

    def test_any_other_address_gets_a_404_even_with_a_forwarded_header(self) -> None:
        for address in ("203.0.113.7", "10.1.2.3", "2001:db8::1", "", "not-an-address"):
            with self.subTest(address=address):
                self.assertEqual(self.status(address, x_forwarded_for="127.0.0.1"), 404)

    @override_settings(CODEX_METRICS_TOKEN=METRICS_TOKEN)
    def test_the_configured_token_opens_it_from_anywhere_and_nothing_else_does(self) -> None:
        self.assertEqual(self.status("203.0.113.7", authorization=f"Bearer {METRICS_TOKEN}"), 200)
        self.assertEqual(self.status("203.0.113.7", authorization=f"bearer {METRICS_TOKEN}"), 200)
        for wrong in (f"Bearer {METRICS_TOKEN}x", f"Bearer {METRICS_TOKEN[:-1]}", f"Basic {METRICS_TOKEN}", "Bearer"):
            with self.subTest(authorization=wrong):
                self.assertEqual(self.status("203.0.113.7", authorization=wrong), 404)

    def test_without_a_configured_token_no_bearer_opens_it(self) -> None:
        self.assertEqual(self.status("203.0.113.7", authorization="Bearer "), 404)

    @override_settings(CODEX_METRICS_ALLOW=["10.0.0.0/8", "192.0.2.1"])
    def test_configured_networks_replace_loopback(self) -> None:
        self.assertEqual(self.status("10.200.0.1"), 200)
        self.assertEqual(self.status("192.0.2.1"), 200)
        self.assertEqual(self.status("192.0.2.2"), 404)
        self.assertEqual(self.status("127.0.0.1"), 404)

    def test_with_metrics_off_nobody_may_scrape(self) -> None:
        codex_metrics.configure(enabled=False)
        self.addCleanup(codex_metrics.configure, enabled=True)
        self.assertEqual(self.status("127.0.0.1"), 404)

    def test_codexes_and_entries_come_from_the_kept_counters_in_one_query(self) -> None:
        for name, entries in (("alice", 3), ("bob", 0)):
            user = get_user_model().objects.create_user(name)
            Codex.objects.create(owner=user, entry_count=entries, stored_bytes=entries * 100)
        with self.assertNumQueries(1):
            found = samples(Client().get("/metrics").content.decode())
        self.assertEqual(value(found, "codex_codexes"), 2)
        self.assertEqual(value(found, "codex_entries"), 3)
        self.assertEqual(value(found, "codex_stored_bytes"), 300)


class ScrapeAllowedTest(SimpleTestCase):
    def test_a_bad_network_is_named(self) -> None:
        with self.assertRaisesMessage(ValueError, "'10.0.0.0/33' is not an IP address or network"):
            exposition.parse_networks(["127.0.0.1", "10.0.0.0/33"])


class MetricsAfterKnownCallsTest(LiveServerTestCase):
    """Known calls over real HTTP, then a scrape of the same server: each counter moved by
    exactly what was done (deltas: the test process's counters are shared by every test)."""

    def scrape(self) -> dict:
        answer = httpx2.get(self.live.base_url + "/metrics", timeout=10)
        self.assertEqual(answer.status_code, 200)
        self.text = answer.text
        return samples(answer.text)

    def test_tool_calls_refusals_and_statuses_are_counted_and_no_label_carries_what_was_sent(self) -> None:
        alice = self.make_user("alice")
        token = self.token_for(alice)
        reader = self.token_for(alice, scopes=("notes:read",))
        expired, foreign = self.token_for(alice), self.token_for(alice)
        AccessToken.objects.filter(token_checksum=token_checksum(expired)).update(
            expires=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        )
        AccessToken.objects.filter(token_checksum=token_checksum(foreign)).update(resource=["https://other/mcp"])
        secret_title, secret_tag, secret_text = "Planted-Title-7Q", "planted-tag-7q", "planted note text 7Q"
        entry = {"content": secret_text, "title": secret_title, "tags": [secret_tag]}
        before = self.scrape()

        saved = [
            call_tool(self.mcp_url, token, "field_notes_save", {"requestId": f"r{i}", "entry": entry}) for i in range(3)
        ]
        self.assertEqual([answer.status_code for answer in saved], [200] * 3)
        entry_id = saved[0].json()["result"]["structuredContent"]["entry"]["id"]
        call_tool(self.mcp_url, token, "field_notes_get", {"id": entry_id})
        call_tool(self.mcp_url, token, "field_notes_get", {"id": "00000000-0000-4000-8000-000000000000"})
        conflict = {"requestId": "r0", "entry": {"content": "other"}}
        call_tool(self.mcp_url, token, "field_notes_save", conflict)
        unknown = call_tool(self.mcp_url, token, "no_such_tool_" + secret_tag, {})
        self.assertEqual(unknown.json()["error"]["code"], -32602)
        self.assertEqual(call_tool(self.mcp_url, reader, "field_notes_save", conflict).status_code, 403)
        for refused in ("no-such-token-" + secret_tag, expired, foreign):
            self.assertEqual(call_tool(self.mcp_url, refused, "field_notes_get", {"id": entry_id}).status_code, 401)
        self.assertEqual(post(self.mcp_url, rpc_body("tools/list"), token=None).status_code, 401)
        with override_settings(CODEX_QUOTA_ENTRIES=3):
            call_tool(self.mcp_url, token, "field_notes_save", {"requestId": "r9", "entry": entry})
        after = self.scrape()

        def moved(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        calls = "codex_tool_calls_total"
        self.assertEqual(moved(calls, tool="field_notes_save", outcome="ok"), 3)
        self.assertEqual(moved(calls, tool="field_notes_get", outcome="ok"), 1)
        self.assertEqual(moved(calls, tool="field_notes_get", outcome="not_found"), 1)
        self.assertEqual(moved(calls, tool="field_notes_save", outcome="conflict"), 1)
        self.assertEqual(moved(calls, tool="field_notes_save", outcome="resource_exhausted"), 1)
        self.assertEqual(moved(calls, tool="unknown", outcome="protocol_error"), 1)
        # A single call's token is checked in its handler: refused there, it is counted as a
        # call with that outcome, and the client gets the HTTP refusal (401/403).
        self.assertEqual(moved(calls, tool="field_notes_save", outcome="permission_denied"), 1)
        self.assertEqual(moved(calls, tool="field_notes_get", outcome="unauthenticated"), 3)
        self.assertEqual(moved("codex_tool_call_duration_seconds_count", tool="field_notes_save"), 6)
        self.assertEqual(moved("codex_limit_refusals_total", kind="entries"), 1)
        for reason in ("missing", "invalid", "expired", "wrong_audience", "insufficient_scope"):
            with self.subTest(reason=reason):
                self.assertEqual(moved("codex_token_refusals_total", reason=reason), 1)
        self.assertEqual(moved("codex_mcp_http_responses_total", status="200"), 8)
        self.assertEqual(moved("codex_mcp_http_responses_total", status="401"), 4)
        self.assertEqual(moved("codex_mcp_http_responses_total", status="403"), 1)
        self.assertEqual(value(after, "codex_entries"), 3)

        for planted in (secret_title, secret_tag, secret_text, entry_id, token, reader, expired):
            self.assertNotIn(planted.lower(), self.text.lower())
        labels = {label for _name, pairs in after for label in pairs}
        allowed_values = {"field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update", "unknown"}
        for key, label_value in labels:
            if key == "tool":
                self.assertIn(label_value, allowed_values)

    def test_outages_limits_and_the_sqlite_writer_are_counted(self) -> None:
        token = self.token_for(self.make_user("alice"))
        missing = {"id": "11111111-1111-4111-8111-111111111111"}
        before = self.scrape()
        outage = OperationalError("could not connect")
        with failing("field_notes_get", outage), self.assertLogs("mcp_endpoint.results", "WARNING"):
            call_tool(self.mcp_url, token, "field_notes_get", missing)
        with (
            mock.patch("mcp_endpoint.auth.check_token_checksum", side_effect=outage),
            self.assertLogs("mcp_endpoint.auth", "WARNING"),
        ):
            self.assertEqual(call_tool(self.mcp_url, token, "field_notes_search", {}).status_code, 503)
        limited = self.token_for(self.make_user("bob"))
        with override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1):
            # Four calls at one call a minute: at least two share a minute, however the
            # minutes fall, so at least one is refused.
            for _ in range(4):
                call_tool(self.mcp_url, limited, "field_notes_get", missing)
        with override_settings(CODEX_DCR_RATE_LIMIT=0):
            body = {"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
            self.assertEqual(httpx2.post(self.live.base_url + "/o/register/", json=body).status_code, 429)
        call_tool(self.mcp_url, token, "field_notes_save", {"requestId": "w1", "entry": {"content": "x"}})
        after = self.scrape()

        def moved(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        self.assertEqual(moved("codex_tool_calls_total", tool="field_notes_get", outcome="unavailable"), 1)
        # The search's token check failed in its handler: a call answered unavailable (HTTP 503).
        self.assertEqual(moved("codex_tool_calls_total", tool="field_notes_search", outcome="unavailable"), 1)
        self.assertEqual(moved("codex_database_unavailable_total"), 2)
        self.assertEqual(moved("codex_mcp_http_responses_total", status="503"), 1)
        self.assertEqual(moved("codex_limit_refusals_total", kind="registrations"), 1)
        self.assertGreaterEqual(moved("codex_limit_refusals_total", kind="tool_calls_per_minute"), 1)
        sqlite = connection.vendor == "sqlite"
        self.assertEqual(moved("codex_sqlite_writer_wait_seconds_count") >= 1, sqlite)
        self.assertEqual(moved("codex_sqlite_log_sync_seconds_count") >= 1, sqlite)


class MultiprocessAggregationTest(SimpleTestCase):
    """Two worker processes count into one directory; a scrape from a third adds them up."""

    WORKER = (
        "import sys, codex_metrics\n"
        "codex_metrics.define_tool_calls(['field_notes_save'], ['ok', 'conflict'])\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    codex_metrics.tool_call('field_notes_save', 'ok', codex_metrics.clock())\n"
        "codex_metrics.token_refused('expired')\n"
    )
    SCRAPE = "import sys; from codex_metrics import exposition; sys.stdout.write(exposition.scrape()[0].decode())"

    def run_python(self, code: str, *args: str, directory: str) -> str:
        env = {**os.environ, exposition.MULTIPROC_ENV: directory}
        done = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_a_scrape_adds_up_every_workers_counts(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            self.run_python(self.WORKER, "3", directory=directory)
            self.run_python(self.WORKER, "5", directory=directory)
            self.assertEqual(len(list(Path(directory).glob("counter_*.db"))), 2)
            found = samples(self.run_python(self.SCRAPE, directory=directory))
        self.assertEqual(value(found, "codex_tool_calls_total", tool="field_notes_save", outcome="ok"), 8)
        self.assertEqual(value(found, "codex_tool_call_duration_seconds_count", tool="field_notes_save"), 8)
        self.assertEqual(value(found, "codex_token_refusals_total", reason="expired"), 2)

    def test_cleaning_the_directory_forgets_the_last_runs_values(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            self.run_python(self.WORKER, "3", directory=directory)
            (Path(directory) / "keep.txt").write_text("not ours")
            self.assertEqual(exposition.clean_multiprocess_dir(directory), 2)
            self.assertEqual(sorted(path.name for path in Path(directory).iterdir()), ["keep.txt"])
            self.run_python(self.WORKER, "1", directory=directory)
            found = samples(self.run_python(self.SCRAPE, directory=directory))
        self.assertEqual(value(found, "codex_tool_calls_total", tool="field_notes_save", outcome="ok"), 1)


@unittest.skipIf(os.environ.get("DATABASE_URL"), "serves its own SQLite database: run once, in the SQLite pass")
class TwoServedWorkersTest(SimpleTestCase):
    """``python -m codex_site.serve --workers 2``: whichever worker answers a scrape, it
    counts every worker's calls, and nothing from the directory's previous run."""

    def test_every_scrape_counts_the_calls_of_both_workers(self) -> None:
        with tempfile.TemporaryDirectory() as var:
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DJANGO_DEBUG"}}
            env.pop(exposition.MULTIPROC_ENV, None)
            env.update(SECRET_KEY="serve-test-" + "k" * 40, CODEX_VAR_DIR=var, CODEX_PUBLIC_URL=base)
            env["CODEX_LOG_LEVEL"] = "ERROR"
            token = migrate_and_mint(env, "w", 600)
            # A previous run's values, which the start must forget.
            stale = Path(var) / "prometheus"
            stale.mkdir()
            MultiprocessAggregationTest.run_python(
                self, MultiprocessAggregationTest.WORKER, "1000", directory=str(stale)
            )
            stale_pids = pids_in(stale)
            self.assertEqual(len(stale_pids), 1)
            server = start_serve(port, env, "--workers", "2", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_until_healthy(base, server)
                # The stale file is gone at once; each worker adds its own as it imports the app
                # (the first may answer before the second has started).
                self.assertEqual(worker_pids(stale, other_than=stale_pids, expected=2), 2)
                for i in range(6):  # each on a new connection: either worker may answer
                    save = {"requestId": f"r{i}", "entry": {"content": "x"}}
                    answer = call_tool(base + "/mcp", token, "field_notes_save", save)
                    self.assertEqual(answer.status_code, 200, answer.text)
                self.assertFalse(stale_pids & pids_in(stale))
                for _ in range(6):
                    with httpx2.Client(timeout=30) as fresh:
                        found = samples(fresh.get(base + "/metrics").text)
                    self.assertEqual(value(found, "codex_tool_calls_total", tool="field_notes_save", outcome="ok"), 6)
                    self.assertEqual(value(found, "codex_token_refusals_total", reason="expired"), 0)
            finally:
                stop(server)


def pids_in(directory: Path) -> set[str]:
    """The processes that have written values into a multiprocess directory."""
    return {path.stem.rsplit("_", 1)[-1] for path in directory.glob("*.db")}


def worker_pids(directory: Path, *, other_than: set[str], expected: int, timeout: float = 60) -> int:
    """How many new processes have written into ``directory``: polled until ``expected`` (bounded)."""
    deadline = time.monotonic() + timeout
    while len(pids_in(directory) - other_than) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(pids_in(directory) - other_than)


class ServeMetricsDirTest(SimpleTestCase):
    def test_several_workers_use_a_directory_under_var_and_one_worker_keeps_memory(self) -> None:
        self.assertEqual(worker_count({}, ["--workers", "4"]), 4)
        self.assertEqual(worker_count({}, ["--workers=3"]), 3)
        self.assertEqual(worker_count({"WEB_CONCURRENCY": "2"}, []), 2)
        self.assertIsNone(metrics_dir({}, []))
        self.assertTrue(metrics_dir({}, ["--workers", "2"]).endswith("/prometheus"))
        self.assertEqual(metrics_dir({exposition.MULTIPROC_ENV: "/tmp/m"}, []), "/tmp/m")

    def test_every_metric_is_documented_in_deploy_md(self) -> None:
        documented = (ROOT / "docs" / "deploy.md").read_text()
        body, _ = exposition.scrape([exposition.UsageCollector(lambda: (0, 0, 0))])
        names = [family.name for family in text_string_to_metric_families(body.decode())]
        ours = [name for name in names if name.startswith("codex_")]
        self.assertGreaterEqual(len(ours), 11)
        for name in ours:
            with self.subTest(name=name):
                self.assertTrue(f"`{name}" in documented, f"{name} is not in docs/deploy.md")
