"""Where a tool call's CPU goes, by layer: a sampling profile of the server under load (figures only).

One run starts the project's server as ``scripts/bench_mcp.py`` does (one uvicorn worker on
CPU 0, a fresh SQLite database or the one ``DATABASE_URL`` names, seeded the same way), drives
each scenario with wrk (``scripts/bench_mcp.lua``, 2026-07-28 requests) from CPU 1, and samples
the worker with py-spy (``--gil``: the thread holding the interpreter lock, so each sample is
Python work that no other thread could do at that moment; waits are not sampled). Each sample
goes to the layer of the innermost frame whose module names one (below), except that everything
under the token check is the token check's; frames of the standard library and of the libraries
every layer uses (pydantic, json, anyio, asyncio) count for the layer that called them, and a
sample with no layer above it is the event loop's.

    uvicorn/Starlette   uvicorn, h11/httptools, Starlette's routing and responses, the event loop
    guard/middleware    the /mcp guard, CORS, the body limit, the access log's and metrics' wrappers
    SDK                 the MCP SDK: transport (or mcp_endpoint.exchange, which takes its place),
                        parsing and validation of the message, dispatch, the result's validation
                        and dump, its OpenTelemetry middleware
    token check         mcp_endpoint.auth and authserver's token check (the statement's driver work
                        under it counts here too)
    tool handler        the tools/call handler: argument checks, the hop to the worker thread and
                        back, the rate limit, the last use, the adapters
    service/DB driver   the notebook (services, selectors, store, sql/), Django's database layer,
                        psycopg and sqlite3
    results/serialisation  the tool's result (representations, mcp_endpoint.results, orjson) and
                        the answer's JSON text (exchange.json_written; the json module, wherever
                        it is called)
    logging             the access line and the logging module

It prints, per scenario: calls/s, the server's CPU per call (from /proc, every thread), the
samples taken, and each layer's share of the samples with that share of the CPU per call in
microseconds. Attribution is by sampled frames, so a layer's figure is an estimate (a layer's
C code that releases the interpreter lock is not sampled; the kernel's time is in no layer).

    bash scripts/with_postgres.sh .venv/bin/python scripts/profile_mcp.py             # get and search by tag
    .venv/bin/python scripts/profile_mcp.py --scenarios get,search_query --seconds 20  # SQLite
    make profile-pg                                                                     # = the first

py-spy (pinned in requirements-test.txt) must be able to read the worker's memory: root, or
``ptrace_scope`` 0.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_mcp  # noqa: E402

LAYERS = (
    "uvicorn/Starlette",
    "guard/middleware",
    "SDK",
    "token check",
    "tool handler",
    "service/DB driver",
    "results/serialisation",
    "logging",
)

# A frame's file -> its layer, the first rule that matches (paths as py-spy prints them:
# site-packages' relative to it, the project's relative to the tree, or absolute).
TOKEN_CHECK = re.compile(r"(^|/)(mcp_endpoint/auth|authserver/core/token_check)\.py")
RULES: tuple[tuple[str, str], ...] = (
    (r"(^|/)json/", "results/serialisation"),
    (r"(^|/)mcp_endpoint/exchange\.py", "SDK"),
    (r"(^|/)mcp_endpoint/(http|cors|envelopes|batches|versions|guard|bodies)\.py", "guard/middleware"),
    (r"(^|/)(codex_site/bodies|codex_metrics/\w+|codex_metrics)\.py", "guard/middleware"),
    (r"(^|/)common/access_log\.py", "logging"),
    (r"(^|/)logging/", "logging"),
    (r"(^|/)(mcp_endpoint/results|notebook/representations)\.py", "results/serialisation"),
    (r"(^|/)orjson", "results/serialisation"),
    (r"(^|/)(notebook|django/db|psycopg|psycopg_c|sqlite3)/", "service/DB driver"),
    (r"(^|/)(mcp_endpoint/(server|tools|arguments|calls|boundary)|common/ratelimit)\.py", "tool handler"),
    (r"(^|/)(authserver/core/last_used)\.py", "tool handler"),
    (r"(^|/)concurrent/futures/thread\.py", "tool handler"),
    (r"(^|/)(mcp|mcp_types)/", "SDK"),
    (r"(^|/)(uvicorn|h11|httptools|starlette)/", "uvicorn/Starlette"),
)
# Functions whose layer is not their module's: the answer's JSON text, written in the SDK's seam.
FUNCTION_RULES: tuple[tuple[str, str], ...] = (
    (r"^(json_written|_plain|_ascii_escaped) \(.*mcp_endpoint/exchange\.py", "results/serialisation"),
)
_COMPILED = tuple((re.compile(pattern), layer) for pattern, layer in RULES)
_FUNCTIONS = tuple((re.compile(pattern), layer) for pattern, layer in FUNCTION_RULES)
# py-spy's raw format: "frame;frame;...;frame count", each frame "function (file:line)".
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^:()]+)(?::\d+)?\)$")


def _path(frame: str) -> str:
    match = _FRAME.match(frame)
    return match.group("file") if match else frame


def layer_of(stack: list[str]) -> str:
    """The token check's if it is on the stack; else the layer of the innermost frame that names
    one; the event loop's when none does."""
    paths = [_path(frame) for frame in stack]
    if any(TOKEN_CHECK.search(path) for path in paths):
        return "token check"
    for frame, path in zip(reversed(stack), reversed(paths), strict=True):
        for pattern, layer in _FUNCTIONS:
            if pattern.search(frame):
                return layer
        for pattern, layer in _COMPILED:
            if pattern.search(path):
                return layer
    return "uvicorn/Starlette"


def layer_shares(raw: str) -> tuple[collections.Counter, int]:
    """Samples by layer from py-spy's raw output, and the samples in all."""
    counts: collections.Counter = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [frame for frame in stack.split(";") if not frame.startswith(("process ", "thread "))]
        counts[layer_of(frames)] += int(count)
    return counts, sum(counts.values())


def ensure_py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("profile_mcp.py needs py-spy: make bootstrap-test (requirements-test.txt pins it)")
    return found


def worker_pid(server: "bench_mcp.Uvicorn") -> int:
    """The process that serves (uvicorn with one worker serves in its own process)."""
    return server.process.pid


def profile(server, wrk: str, py_spy: str, scenario: str, *, options: dict, seconds: int, rate: int, out: Path) -> dict:
    """wrk on ``scenario`` for ``seconds`` while py-spy samples the server: the figures and the layers."""
    bench_mcp.measure(server, wrk, scenario, duration=2, **options)  # warm: imports, caches, statements
    # --gil: the samples of the thread running Python (others wait for it, or for the database);
    # --nonblocking: py-spy's blocking mode, which pauses the process for each sample, left the
    # worker threads all but unsampled (a get's token check at 2 % of the samples, not 9 to 14 %);
    # a stack read while the process runs may now and then mix two moments.
    record = [py_spy, "record", "--pid", str(worker_pid(server)), "--gil", "--nonblocking", "--format", "raw"]
    record += ["--rate", str(rate), "--duration", str(seconds), "--output", str(out)]
    sampler = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # py-spy attaches
    figures = bench_mcp.measure(server, wrk, scenario, duration=seconds, **options)
    _, errors = sampler.communicate(timeout=seconds + 60)
    if sampler.returncode != 0 or not out.exists():
        raise SystemExit(f"py-spy failed: {errors.decode(errors='replace')[-2000:]}")
    counts, total = layer_shares(out.read_text())
    return {"figures": figures, "counts": counts, "total": total}


def report(scenario: str, connections: int, found: dict) -> None:
    figures, counts, total = found["figures"], found["counts"], max(found["total"], 1)
    cpu_us = figures["cpu_per_call"] * 1e6
    print(
        f"\n{bench_mcp.LABELS.get(scenario, scenario)}, {connections} connections: {figures['rate']:.0f} calls/s, "
        f"server CPU {cpu_us:.0f} us per call, {found['total']} samples, {figures['errors']:.0f} errors"
    )
    print(f"  {'layer':<22} {'samples':>8} {'us/call':>8}")
    for layer in LAYERS:
        share = counts.get(layer, 0) / total
        print(f"  {layer:<22} {100 * share:7.1f}% {share * cpu_us:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default="get,search_tag", help="comma-separated (default get,search_tag)")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (default 8)")
    parser.add_argument("--seconds", type=int, default=15, help="seconds sampled per scenario (default 15)")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second (default 250)")
    parser.add_argument("--anchor", action="store_true", help="also profile the no-op SDK anchor")
    parser.add_argument("--raw", metavar="DIR", help="keep py-spy's raw samples in DIR, one file per scenario")
    args = parser.parse_args()
    scenarios = [name for name in args.scenarios.split(",") if name]
    unknown = set(scenarios) - set(bench_mcp.SCENARIOS) - {"update"}
    if unknown:
        raise SystemExit(f"unknown scenarios: {sorted(unknown)}")

    wrk, py_spy = bench_mcp.ensure_wrk(), ensure_py_spy()
    pinned = len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset") is not None
    server_cpu, wrk_cpu = (0, 1) if pinned else (None, None)
    var = tempfile.mkdtemp(prefix="codex-profile-")
    samples = Path(args.raw) if args.raw else Path(var)
    samples.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        DJANGO_DEBUG="0",
        SECRET_KEY="profile-" + "k" * 50,
        CODEX_VAR_DIR=var,
        CODEX_PUBLIC_URL=f"http://127.0.0.1:{bench_mcp.free_port()}",
        CODEX_LOG_LEVEL="WARNING",
        CODEX_TOOL_CALLS_PER_MINUTE=os.environ.get("CODEX_TOOL_CALLS_PER_MINUTE", "1000000000"),
    )
    token, get_ids, _update_ids, _density = bench_mcp.setup_database(env, densities=False)
    get_file = Path(var, "get-ids.txt")
    get_file.write_text("".join(f"{i} 1\n" for i in get_ids))
    database = os.environ.get("DATABASE_URL", "sqlite (temp file)").split("@")[-1]
    print(f"database: {database}; py-spy --gil at {args.rate}/s, {args.seconds} s per scenario; one uvicorn worker")
    servers = []
    try:
        if args.anchor:
            noop = bench_mcp.Uvicorn(
                ["--app-dir", str(ROOT / "scripts"), "bench_noop_server:app"], workers=1, cpu=server_cpu, env=env
            )
            servers.append(noop)
            options = dict(token=token, connections=args.connections, cpu=wrk_cpu, id_file="-")
            found = profile(
                noop,
                wrk,
                py_spy,
                "noop",
                options=options,
                seconds=args.seconds,
                rate=args.rate,
                out=samples / "noop.txt",
            )
            report("noop", args.connections, found)
        project = bench_mcp.Uvicorn(["codex_site.asgi:application"], workers=1, cpu=server_cpu, env=env)
        servers.append(project)
        for scenario in scenarios:
            options = dict(token=token, connections=args.connections, cpu=wrk_cpu, id_file=str(get_file))
            found = profile(
                project,
                wrk,
                py_spy,
                scenario,
                options=options,
                seconds=args.seconds,
                rate=args.rate,
                out=samples / f"{scenario}.txt",
            )
            report(scenario, args.connections, found)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
