"""Put load on a server and photograph its Prometheus console (the dashboard in
``deploy/prometheus/``), for the docs' screenshot (figures only; nothing fails on speed).

    .venv/bin/python scripts/metrics_console.py [--seconds 200] [--out docs/images/metrics-console.png]

Starts, all on 127.0.0.1: a fresh SQLite database, ``python -m codex_site.serve --workers 2``
(so the scrape adds up both workers: prometheus-client's multiprocess mode), Debian's
Prometheus scraping it every second with the console template, and a load of tool calls from
a few threads (saves, gets, searches, updates, a share of not_found, conflicts and refused
tokens). Then headless Chromium opens the console over the last four minutes and saves a
screenshot. Everything it started is stopped by process id.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import headless_chromium  # noqa: E402
from tests.prometheus import Prometheus  # noqa: E402
from tests.served import free_port, migrate_and_mint, start_serve, stop, wait_until_healthy  # noqa: E402

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def call(http: httpx2.Client, url: str, token: str, name: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    answer = http.post(
        url, json=body, headers={**HEADERS, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
    )
    return answer.json() if answer.status_code == 200 else {}


def load(url: str, token: str, until: float, seed: int) -> None:
    rng = random.Random(seed)
    saved: list[tuple[str, int]] = []
    with httpx2.Client(timeout=30) as http:
        while time.monotonic() < until:
            roll = rng.random()
            if roll < 0.35 or not saved:
                entry = {"content": f"load note {uuid.uuid4()}", "tags": [f"t{rng.randrange(5)}"]}
                result = call(http, url, token, "field_notes_save", {"requestId": uuid.uuid4().hex, "entry": entry})
                got = result.get("result", {}).get("structuredContent", {}).get("entry")
                if got:
                    saved.append((got["id"], got["revision"]))
            elif roll < 0.65:
                entry_id = rng.choice(saved)[0] if rng.random() < 0.9 else str(uuid.uuid4())
                call(http, url, token, "field_notes_get", {"id": entry_id})
            elif roll < 0.85:
                call(http, url, token, "field_notes_search", {"tag": f"t{rng.randrange(5)}", "limit": 10})
            elif roll < 0.97:
                index = rng.randrange(len(saved))
                entry_id, revision = saved[index]
                stale = rng.random() < 0.2  # a share of conflicts
                result = call(
                    http,
                    url,
                    token,
                    "field_notes_update",
                    {
                        "id": entry_id,
                        "expectedRevision": revision - 1 if stale and revision > 1 else revision,
                        "entry": {"content": f"updated {uuid.uuid4()}"},
                    },
                )
                got = result.get("result", {}).get("structuredContent", {}).get("entry")
                if got:
                    saved[index] = (got["id"], got["revision"])
            else:
                call(http, url, "not-a-token", "field_notes_get", {"id": str(uuid.uuid4())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=200, help="seconds of load (default 200)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "metrics-console.png"))
    args = parser.parse_args()

    var = tempfile.mkdtemp(prefix="codex-console-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR"}}
    env.update(
        DJANGO_DEBUG="0",
        SECRET_KEY="console-" + "k" * 50,
        CODEX_VAR_DIR=var,
        CODEX_PUBLIC_URL=base,
        CODEX_LOG_LEVEL="WARNING",
        CODEX_TOOL_CALLS_PER_MINUTE="100000000",
    )
    token = migrate_and_mint(env, "console", 7200)
    server = start_serve(port, env, "--workers", "2", "--log-level", "warning")
    prometheus = Prometheus(f"127.0.0.1:{port}")
    try:
        wait_until_healthy(base, server)
        prometheus.start()
        until = time.monotonic() + args.seconds
        threads = [
            threading.Thread(target=load, args=(base + "/mcp", token, until, seed)) for seed in range(args.threads)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(3)  # the last scrapes
        calls = prometheus.scalar("sum(codex_tool_calls_total)")
        print(f"tool calls counted by Prometheus: {calls:.0f}")
        web = headless_chromium()
        try:
            web.set_window_size(1400, 1250)
            web.get(prometheus.base_url + '/consoles/agent-codex.html#pctc{"duration":240,"endTime":0}')
            time.sleep(6)  # the graphs query Prometheus from the page
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            web.save_screenshot(args.out)
        finally:
            web.quit()
        print(f"screenshot: {args.out}")
    finally:
        prometheus.stop()
        stop(server)
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
