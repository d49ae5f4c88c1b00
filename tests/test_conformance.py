"""The MCP conformance suite (pinned) against a live server: every scenario that applies passes.

The suite sends no token, so a proxy in front adds one (``tests.token_proxy``), as a client's
own OAuth would; the proxy's origin is the server's allowed origin, as a public address in
front of a deployment is. The scenarios that cannot apply, each with its reason, are the
suite's baseline in tests/clients/conformance-not-applicable.yaml: the suite fails on any other
failure, and on a baseline entry that starts passing."""

import subprocess
from pathlib import Path
from unittest import SkipTest

from django.conf import settings
from django.test import override_settings

from tests.live import LiveServerTestCase
from tests.test_docs_examples import npx_available
from tests.token_proxy import TokenProxy

CONFORMANCE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
BASELINE = Path(settings.BASE_DIR) / "tests" / "clients" / "conformance-not-applicable.yaml"


class ConformanceSuiteTest(LiveServerTestCase):
    def test_every_applicable_scenario_passes(self) -> None:
        if not npx_available():  # raises instead where CODEX_REQUIRE_NODE=1
            raise SkipTest("the conformance suite needs npx (apt-get install nodejs npm)")
        token = self.token_for(self.make_user("alice"))
        with TokenProxy(self.live.base_url, token) as proxy, override_settings(CODEX_ALLOWED_ORIGINS=[proxy.base_url]):
            suite = ["npx", "-y", "-p", "node@22", "-p", CONFORMANCE, "--", "conformance", "server"]
            finished = subprocess.run(
                [*suite, "--url", proxy.base_url + "/mcp", "--expected-failures", str(BASELINE)],
                capture_output=True,
                text=True,
                timeout=600,
            )
        self.assertIn("Baseline check passed", finished.stdout, finished.stdout[-6000:] + finished.stderr[-2000:])
        self.assertEqual(finished.returncode, 0, finished.stdout[-6000:])
