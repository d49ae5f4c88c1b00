"""A real Prometheus scrapes a live server: PromQL answers match the calls that were made,
and the dashboard's console template renders with the metrics in it."""

import httpx2

from tests.http_client import call_tool, post, rpc_body
from tests.live import LiveServerTestCase
from tests.prometheus import JOB, Prometheus, prometheus_binary
from tests.test_metrics import samples, value

MISSING = "00000000-0000-4000-8000-000000000000"


class PrometheusScrapeTest(LiveServerTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        prometheus_binary()  # skip (or fail in CI) before starting anything
        super().setUpClass()
        cls.prometheus = Prometheus(f"127.0.0.1:{cls.live.port}")
        try:
            cls.prometheus.start()
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.prometheus.stop()
        super().tearDownClass()

    def test_promql_answers_count_the_calls_that_were_made(self) -> None:
        token = self.token_for(self.make_user("alice"))
        before = samples(httpx2.get(self.live.base_url + "/metrics", timeout=10).text)

        def base(name: str, **labels: str) -> float:
            return value(before, name, **labels)

        saved = [
            call_tool(self.mcp_url, token, "field_notes_save", {"requestId": f"r{i}", "entry": {"content": f"n{i}"}})
            for i in range(4)
        ]
        entry_id = saved[0].json()["result"]["structuredContent"]["entry"]["id"]
        call_tool(self.mcp_url, token, "field_notes_get", {"id": entry_id})
        call_tool(self.mcp_url, token, "field_notes_get", {"id": MISSING})
        call_tool(self.mcp_url, token, "field_notes_get", {"id": MISSING})
        post(self.mcp_url, rpc_body("tools/list"), token=None)

        save_ok = f'codex_tool_calls_total{{job="{JOB}",tool="field_notes_save",outcome="ok"}}'
        expected = base("codex_tool_calls_total", tool="field_notes_save", outcome="ok") + 4
        self.assertEqual(self.prometheus.wait_for(save_ok, expected), expected)
        checks = {
            'codex_tool_calls_total{tool="field_notes_get",outcome="not_found"}': base(
                "codex_tool_calls_total", tool="field_notes_get", outcome="not_found"
            )
            + 2,
            'sum(codex_tool_calls_total{tool="field_notes_get"})': sum(
                count
                for (name, labels), count in before.items()
                if name == "codex_tool_calls_total" and ("tool", "field_notes_get") in labels
            )
            + 3,
            'codex_token_refusals_total{reason="missing"}': base("codex_token_refusals_total", reason="missing") + 1,
            'codex_mcp_http_responses_total{status="401"}': base("codex_mcp_http_responses_total", status="401") + 1,
            'codex_tool_call_duration_seconds_count{tool="field_notes_save"}': base(
                "codex_tool_call_duration_seconds_count", tool="field_notes_save"
            )
            + 4,
            "codex_entries": 4,
            "codex_codexes": 1,
            f'up{{job="{JOB}"}}': 1,
        }
        for promql, wanted in checks.items():
            with self.subTest(promql=promql):
                self.assertEqual(self.prometheus.wait_for(promql, wanted), wanted)
        # A quantile over the histogram is a number of seconds (every save took some time).
        p99 = self.prometheus.wait_until(
            'histogram_quantile(0.99, sum by (le) (codex_tool_call_duration_seconds_bucket{tool="field_notes_save"}))',
            lambda seconds: seconds > 0,
        )
        self.assertIsNotNone(p99)
        self.assertGreater(p99, 0)

        console = self.prometheus.page_with("/consoles/agent-codex.html", "<th>entries</th><td>4</td>")
        self.assertEqual(console.status_code, 200, console.text[:500])
        self.assertIn("<h1>Agent Codex</h1>", console.text)
        self.assertIn("<th>entries</th><td>4</td>", console.text)
        for script in ("rickshaw/rickshaw.min.js", "js/prom_console.js"):
            with self.subTest(script=script):
                self.assertEqual(httpx2.get(f"{self.prometheus.base_url}/classic/static/{script}").status_code, 200)
