"""Measurements for deploy/try_stack.sh (run by it, against its stack, on 127.0.0.1 only).

Prints a table: latency of normal clients before and during a slow-client flood
through nginx, what the flood does to the workers (with the proxy, and for
comparison straight at one worker), and that two workers share one rate limit and
one revocation. All load is bounded in count and duration.
"""

import argparse
import asyncio
import datetime as dt
import json
import os
import ssl
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
import django

django.setup()
from django.contrib.auth import get_user_model  # noqa: E402

from authserver.core.revocation import access_revoke  # noqa: E402
from authserver.core.tokens import mint_access_token  # noqa: E402

# Slow connections through the proxy: 1,100 in all, more than a 1,024 open-files limit.
PROXY_FLOOD = {"silent": 1_000, "slow-headers": 50, "slow-body": 50}
FLOOD = sum(PROXY_FLOOD.values())
DIRECT_FLOOD = 200  # slow connections straight at one worker, for comparison
FLOOD_SECONDS = 20.0  # the longest the flood is held (nginx's timeouts are 10 s)
DIRECT_SECONDS = 12.0
LATENCY_CALLS = 120


def rpc(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def latency(base: str, token: str, calls: int = LATENCY_CALLS, workers: int = 4) -> dict:
    """tools/list through the given base URL: bearer check against PostgreSQL + the SDK."""
    body = json.dumps(rpc("tools/list")).encode()
    times: list[float] = []
    errors = 0
    lock = threading.Lock()

    def one(_: int) -> None:
        nonlocal errors
        with httpx2.Client(verify=False, timeout=30) as client:
            started = time.perf_counter()
            try:
                ok = client.post(base + "/mcp", content=body, headers=headers(token)).status_code == 200
            except httpx2.TransportError:
                ok = False
            elapsed = time.perf_counter() - started
        with lock:
            times.append(elapsed)
            errors += not ok

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(calls)))
    times.sort()
    return {
        "calls": calls,
        "errors": errors,
        "p50_ms": statistics.median(times) * 1000,
        "p95_ms": times[int(len(times) * 0.95) - 1] * 1000,
        "max_ms": times[-1] * 1000,
    }


async def slow_connection(host: str, port: int, kind: str, stats: dict, setup: asyncio.Semaphore) -> None:
    """One slow client: connects, then never finishes its request.

    ``silent``: a TCP connection that sends nothing (not even a TLS hello);
    ``slow-headers`` / ``slow-body`` (over TLS when ``stats["tls"]``): a request whose
    headers, or body, stop arriving."""
    context = None
    if stats["tls"] and kind != "silent":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    async with setup:  # bounded concurrent connection set-ups (TLS handshakes cost CPU)
        try:
            reader, writer = await asyncio.open_connection(host, port, ssl=context)
            if kind == "slow-headers":
                writer.write(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode())
            elif kind == "slow-body":
                writer.write(
                    f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                    'Content-Length: 100000\r\n\r\n{"jsonrpc":'.encode()
                )
            await writer.drain()
        except OSError:
            stats["failed"] += 1
            return
    opened = time.monotonic()
    stats["opened"] += 1
    stats["open"] += 1
    stats["max_open"] = max(stats["max_open"], stats["open"])
    try:
        while True:  # until the server closes the connection, or the flood ends
            remaining = opened + stats["hold"] - time.monotonic()
            if remaining <= 0:
                stats["open_at_end"] += 1
                stats["open_at_end_kinds"][kind] = stats["open_at_end_kinds"].get(kind, 0) + 1
                break
            try:
                if not await asyncio.wait_for(reader.read(65536), timeout=remaining):
                    stats["closed_after"].append(time.monotonic() - opened)
                    break
            except TimeoutError:
                stats["open_at_end"] += 1
                stats["open_at_end_kinds"][kind] = stats["open_at_end_kinds"].get(kind, 0) + 1
                break
    except OSError:
        stats["closed_after"].append(time.monotonic() - opened)
    finally:
        stats["open"] -= 1
        writer.close()


async def flood(base: str, kinds: dict[str, int], seconds: float) -> dict:
    """Open ``kinds`` slow connections (kind -> count); hold each for at most ``seconds``."""
    parts = urlsplit(base)
    stats: dict = {
        "tls": parts.scheme == "https",
        "hold": seconds,  # each connection is held at most this long after it opened
        "opened": 0,
        "failed": 0,
        "open": 0,
        "max_open": 0,
        "open_at_end": 0,
        "open_at_end_kinds": {},
        "closed_after": [],
    }
    setup = asyncio.Semaphore(50)
    order = [kind for kind, count in kinds.items() for _ in range(count)]
    await asyncio.gather(*(slow_connection(parts.hostname, parts.port, kind, stats, setup) for kind in order))
    closed = sorted(stats.pop("closed_after"))
    stats["closed_by_server"] = len(closed)
    stats["closed_median_s"] = statistics.median(closed) if closed else None
    stats["closed_max_s"] = closed[-1] if closed else None
    return stats


def flood_with_latency(proxy: str, token: str, worker_pids: list[int]) -> tuple[dict, dict, list[int]]:
    """Hold the flood on the proxy while normal clients measure latency through it."""
    result: dict = {}
    fds_during: list[int] = []

    def normal_clients() -> None:
        time.sleep(3)  # let the flood connect first
        fds_during.extend(open_fds(pid) for pid in worker_pids)
        result.update(latency(proxy, token))

    thread = threading.Thread(target=normal_clients)
    thread.start()
    flooded = asyncio.run(flood(proxy, PROXY_FLOOD, FLOOD_SECONDS))
    thread.join()
    return flooded, result, fds_during


def shared_rate_limit(workers: list[str], token: str, calls: int = 30) -> dict:
    body = json.dumps(rpc("tools/call", {"name": "field_notes_search", "arguments": {}})).encode()
    counts = {"ok": 0, "resource_exhausted": 0, "other": 0}
    per_worker = {w: 0 for w in workers}
    with httpx2.Client(timeout=30) as client:
        for i in range(calls):
            worker = workers[i % len(workers)]
            reply = client.post(worker + "/mcp", content=body, headers=headers(token)).json()
            result = reply.get("result", {})
            if not result.get("isError"):
                counts["ok"] += 1
                per_worker[worker] += 1
            elif '"resource_exhausted"' in result["content"][0]["text"]:
                counts["resource_exhausted"] += 1
            else:
                counts["other"] += 1
    return {"calls": calls, **counts, "ok_per_worker": list(per_worker.values())}


def shared_revocation(workers: list[str], user, token: str) -> dict:
    body = json.dumps(rpc("tools/list")).encode()

    def statuses() -> list[int]:
        with httpx2.Client(timeout=30) as client:
            return [client.post(w + "/mcp", content=body, headers=headers(token)).status_code for w in workers]

    before = statuses()
    started = time.perf_counter()
    access_revoke(user=user, by="operator")
    after = statuses()
    return {"before": before, "after": after, "after_ms": (time.perf_counter() - started) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--worker", action="append", required=True)
    parser.add_argument("--worker-pids", required=True)
    args = parser.parse_args()
    pids = [int(pid) for pid in args.worker_pids.split(",")]
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))

    deadline = time.monotonic() + 30
    while True:
        try:
            ready = [httpx2.get(w + "/healthz", timeout=2).status_code for w in args.worker]
            if ready == [200] * len(args.worker) and httpx2.get(args.proxy + "/healthz", verify=False).status_code:
                break
        except httpx2.TransportError:
            pass
        if time.monotonic() > deadline:
            sys.exit("stack_probe: the stack did not come up")
        time.sleep(0.3)

    user, _ = get_user_model().objects.get_or_create(username="stack-probe")
    life = dt.timedelta(minutes=30)
    latency_token = mint_access_token(user=user, scopes=["notes:read"], lifetime=life)
    rows: list[tuple[str, str]] = []
    health = httpx2.get(args.proxy + "/healthz", verify=False)
    rows.append(("/healthz through nginx", f"{health.status_code} {health.text}"))

    fds_before = [open_fds(pid) for pid in pids]
    before = latency(args.proxy, latency_token)
    rows.append(
        (
            "normal clients, no flood",
            f"{before['calls']} calls, p50 {before['p50_ms']:.1f} ms, p95 {before['p95_ms']:.1f} ms, "
            f"max {before['max_ms']:.0f} ms, errors {before['errors']}",
        )
    )
    started = time.monotonic()
    flooded, during, fds_during = flood_with_latency(args.proxy, latency_token, pids)
    rows.append(
        (
            "normal clients during the flood",
            f"{during['calls']} calls, p50 {during['p50_ms']:.1f} ms, p95 {during['p95_ms']:.1f} ms, "
            f"max {during['max_ms']:.0f} ms, errors {during['errors']}",
        )
    )
    rows.append(
        (
            f"flood via nginx: {FLOOD} slow connections (1,000 silent, 50 slow headers, 50 slow bodies)",
            f"{flooded['opened']} opened ({flooded['failed']} refused), at most {flooded['max_open']} open at once; "
            f"{flooded['closed_by_server']} closed by nginx after a median {flooded['closed_median_s'] or 0:.1f} s "
            f"(max {flooded['closed_max_s'] or 0:.1f} s); {flooded['open_at_end']} still open "
            f"{FLOOD_SECONDS:.0f} s later; whole flood {time.monotonic() - started:.0f} s",
        )
    )
    rows.append(
        (
            "worker open files (fds) before / during flood",
            f"{fds_before} / {fds_during}  (the flood never reaches a worker)",
        )
    )

    direct_fds_before = open_fds(pids[0])
    direct: dict = {}

    async def direct_flood() -> None:
        task = asyncio.create_task(flood(args.worker[0], {"slow-headers": DIRECT_FLOOD}, DIRECT_SECONDS))
        await asyncio.sleep(DIRECT_SECONDS / 2)
        direct["fds"] = open_fds(pids[0])
        direct.update(await task)

    asyncio.run(direct_flood())
    rows.append(
        (
            f"for comparison, {DIRECT_FLOOD} slow connections straight at a worker",
            f"{direct['opened']} opened, {direct['closed_by_server']} closed by uvicorn, "
            f"{direct['open_at_end']} still open {DIRECT_SECONDS:.0f} s later; worker fds "
            f"{direct_fds_before} -> {direct['fds']} (uvicorn has no header timeout)",
        )
    )

    rate_token = mint_access_token(user=user, scopes=["notes:read"], lifetime=life)
    shared = shared_rate_limit(args.worker, rate_token)
    rows.append(
        (
            "one token, 30 tools/call alternating 2 workers (limit 20/min)",
            f"{shared['ok']} ok ({'+'.join(map(str, shared['ok_per_worker']))}), "
            f"{shared['resource_exhausted']} resource_exhausted, {shared['other']} other",
        )
    )
    revocation_token = mint_access_token(user=user, scopes=["notes:read"], lifetime=life)
    revoked = shared_revocation(args.worker, user, revocation_token)
    rows.append(
        (
            "revocation seen by both workers",
            f"HTTP {revoked['before']} before, {revoked['after']} right after revoke_tokens "
            f"({revoked['after_ms']:.0f} ms later)",
        )
    )

    width = max(len(label) for label, _ in rows)
    print()
    print(f"{'measurement':<{width}} | figure")
    print(f"{'-' * width}-|-{'-' * 60}")
    for label, figure in rows:
        print(f"{label:<{width}} | {figure}")


if __name__ == "__main__":
    main()
