"""A real Prometheus server (Debian's ``prometheus`` package) on 127.0.0.1 for the metrics
tests: it scrapes a live server every second, with this repository's console template.

Without the binary the tests skip, unless ``CODEX_REQUIRE_PROMETHEUS=1`` (CI sets it), which
makes a missing Prometheus a failure instead.
"""

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from tests.served import free_port, missing, stop, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent
JOB = "agent-codex"  # the job name deploy/prometheus/ uses, so the console's queries apply


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        missing(
            "the metrics tests need Prometheus (apt-get install prometheus)", required_by="CODEX_REQUIRE_PROMETHEUS"
        )
    return found


class Prometheus:
    """``prometheus`` scraping ``target`` (host:port) every second; ``stop()`` ends it."""

    def __init__(self, target: str) -> None:
        self.binary = prometheus_binary()
        self.dir = Path(tempfile.mkdtemp(prefix="codex-prometheus-"))
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.process: subprocess.Popen | None = None
        self.base_url = ""

    def start(self) -> None:
        # The port is chosen free just before; if another process takes it first, try another.
        for _attempt in range(3):
            port = free_port()
            self.base_url = f"http://127.0.0.1:{port}"
            log = open(self.dir / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.dir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--web.console.templates={ROOT / 'deploy/prometheus/consoles'}",
                    f"--web.console.libraries={ROOT / 'deploy/prometheus/console_libraries'}",
                ],
                stdout=log,
                stderr=log,
            )
            self.log = log
            try:
                wait_until_healthy(self.base_url, self.process, path="/-/ready")
                return
            except RuntimeError:
                self.stop(keep_dir=True)
        raise RuntimeError("Prometheus did not start: " + (self.dir / "prometheus.log").read_text()[-2000:])

    def stop(self, keep_dir: bool = False) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None
            self.log.close()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = httpx2.get(self.base_url + "/api/v1/query", params={"query": promql}, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def scalar(self, promql: str) -> float | None:
        """The value of a query that gives one series, or None while it gives none."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def wait_for(self, promql: str, expected: float, timeout: float = 90) -> float | None:
        """Poll until ``promql`` equals ``expected`` (scrapes are a second apart, so this
        bounds the wait, not the test); the last value seen otherwise."""
        return self.wait_until(promql, lambda seen: seen == expected, timeout)

    def wait_until(self, promql: str, good: Callable[[float], bool], timeout: float = 90) -> float | None:
        """Poll until ``promql`` gives a value that ``good`` accepts (a scrape that timed out on
        a loaded machine leaves the target's series stale for a moment); the last value seen
        otherwise."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.scalar(promql)
            if seen is not None and good(seen):
                return seen
            time.sleep(0.25)
        return seen

    def page_with(self, path: str, wanted: str, timeout: float = 90) -> httpx2.Response:
        """GET ``path`` of the Prometheus server until its text holds ``wanted`` (bounded);
        the last answer otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx2.get(self.base_url + path, timeout=10)
            if wanted in answer.text or time.monotonic() > deadline:
                return answer
            time.sleep(0.25)
