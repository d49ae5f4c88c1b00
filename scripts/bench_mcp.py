"""Benchmark the MCP endpoint over real HTTP and print figures (no pass/fail).

Starts uvicorn (one worker) on 127.0.0.1 against a fresh database, then drives tools/call
with raw JSON-RPC POSTs from concurrent clients and reports calls/s, latency percentiles
and the server's resident memory.

    .venv/bin/python scripts/bench_mcp.py                       # SQLite in a temp dir
    DATABASE_URL=postgres://... .venv/bin/python scripts/bench_mcp.py
    scripts/with_postgres.sh .venv/bin/python scripts/bench_mcp.py --calls 2000 --concurrency 16
"""

import argparse
import asyncio
import datetime as dt
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def drive(url: str, token: str, calls: list[dict], concurrency: int) -> tuple[float, list[float], int]:
    import httpx2

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue = asyncio.Queue()
    for index, call in enumerate(calls):
        queue.put_nowait((index, call))

    async def worker(http: httpx2.AsyncClient) -> None:
        nonlocal errors
        while not queue.empty():
            index, call = queue.get_nowait()
            body = {"jsonrpc": "2.0", "id": index, "method": "tools/call", "params": call}
            started = time.perf_counter()
            response = await http.post(url, content=json.dumps(body), headers=headers)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200 or response.json().get("result", {}).get("isError"):
                errors += 1

    limits = httpx2.Limits(max_connections=concurrency)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return elapsed, latencies, errors


def report(label: str, elapsed: float, latencies: list[float], errors: int) -> None:
    latencies = sorted(latencies)
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    print(
        f"{label:<34} {len(latencies) / elapsed:8.1f} calls/s   p50 {p(0.5):6.1f} ms   "
        f"p95 {p(0.95):6.1f} ms   p99 {p(0.99):6.1f} ms   mean {statistics.mean(latencies) * 1000:6.1f} ms"
        f"   errors {errors}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=600, help="calls per scenario")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat-get", type=int, default=1, help="run the get scenario this many times (profiling)")
    args = parser.parse_args()

    var = tempfile.mkdtemp(prefix="codex-bench-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        DJANGO_DEBUG="0",
        SECRET_KEY="bench-" + "k" * 50,
        CODEX_VAR_DIR=var,
        CODEX_PUBLIC_URL=base,
        CODEX_LOG_LEVEL="WARNING",
    )
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from authserver.tokens import mint_access_token

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    token = mint_access_token(user=user, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=2))
    from django.db import connections

    connections.close_all()

    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "codex_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("uvicorn did not start") from None
                time.sleep(0.1)
        url = base + "/mcp"
        database = os.environ.get("DATABASE_URL", "sqlite").split("@")[-1]
        print(f"database: {database}; {args.calls} calls per scenario, {args.concurrency} concurrent clients")
        print(f"server RSS at start: {rss_mib(server.pid):.0f} MiB")

        content = "Field note about the launch checklist and its rollback step. " * 8
        saves = [
            {
                "name": "field_notes_save",
                "arguments": {
                    "requestId": f"bench-{i}",
                    "entry": {"content": f"{content} #{i}", "tags": [f"t{i % 10}"]},
                },
            }
            for i in range(args.calls)
        ]
        report("save (new entries)", *asyncio.run(drive(url, token, saves, args.concurrency)))
        report("save (replays)", *asyncio.run(drive(url, token, saves, args.concurrency)))

        from notebook.models import Entry

        ids = [str(pk) for pk in Entry.objects.values_list("id", flat=True)[:50]]
        connections.close_all()
        gets = [{"name": "field_notes_get", "arguments": {"id": ids[i % len(ids)]}} for i in range(args.calls)]
        for _ in range(args.repeat_get):
            report("get", *asyncio.run(drive(url, token, gets, args.concurrency)))
        browse = [{"name": "field_notes_search", "arguments": {"limit": 20}} for _ in range(args.calls)]
        report("search, unfiltered, limit 20", *asyncio.run(drive(url, token, browse, args.concurrency)))
        scan = [
            {"name": "field_notes_search", "arguments": {"query": "no such words", "limit": 50}}
            for _ in range(args.calls)
        ]
        report("search, query scanning 100", *asyncio.run(drive(url, token, scan, args.concurrency)))
        by_tag = [{"name": "field_notes_search", "arguments": {"tag": "t3", "limit": 50}} for _ in range(args.calls)]
        report("search, tag filter", *asyncio.run(drive(url, token, by_tag, args.concurrency)))
        updates = [
            {
                "name": "field_notes_update",
                "arguments": {"id": ids[i % len(ids)], "expectedRevision": 1, "entry": {"content": "x"}},
            }
            for i in range(len(ids))
        ]
        report("update (first per entry)", *asyncio.run(drive(url, token, updates, args.concurrency)))
        print(f"server RSS at end: {rss_mib(server.pid):.0f} MiB")
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
