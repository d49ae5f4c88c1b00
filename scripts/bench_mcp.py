"""Benchmark the MCP endpoint against the SDK's own limit, over real HTTP (figures, no pass/fail).

One run starts two uvicorn servers side by side with the same flags and worker count:
the bare SDK anchor (``scripts/bench_noop_server.py``: one no-op tool) and the project
(on a fresh SQLite database, or the one ``DATABASE_URL`` names). ``wrk`` then drives
each with ``scripts/bench_mcp.lua`` (2026-07-28 requests: one POST per call with
``Mcp-Method``/``Mcp-Name``/``MCP-Protocol-Version`` headers and the version in
``params._meta``; every answer checked, errors counted) and this prints, for get, save
(a fresh requestId per call), update (tracked revisions), search by tag and search by
query, calls/s, p50, p99 and calls/s as a fraction of the no-op anchor, at each
connection count. With two or more CPUs the servers run on CPU 0 and wrk on CPU 1.

The ``query-<density>`` scenarios search (limit 20, first page) a second codex of 10,000
entries for a word held by that share of them (0.01 %: one entry, then 0.1, 1, 10 and 100 %),
seeded once through the services before measuring, only when one of them is asked for.

Shared machines drift: the same server's calls/s can halve from one minute to the next.
So each scenario's ``--duration`` is cut into ``--rounds`` slices, and every slice of the
project is run right after a slice of the anchor of the same length; "vs no-op" is the
project's calls over the anchor's calls in those paired slices, and p50/p99 are the
medians over the slices. "cpu/call" is the server's CPU time (user + system, every
worker) per call, which idle time and a slower client do not change; "cpu vs no-op" is
the anchor's CPU per call over the project's. On a PostgreSQL server this machine runs
(its ``data_directory`` readable), "db cpu/call" is that server's CPU time (every process of
its postmaster) per call: the backend's share, which on a shared machine competes for the
same cores.

``--observability`` runs the project twice, same build, each server on its own copy of the
SQLite database: with metrics and JSON logs off (``CODEX_METRICS=0``, the default plain lines
at INFO) and on (``CODEX_METRICS=1``, ``CODEX_LOG_FORMAT=json``), each logging to a file.
``--off-settings CODEX_LOG_LEVEL=WARNING`` compares with a server that writes no lines. The two are
under load at the same time, each from its own wrk, both servers on one CPU, so that the
machine's drift weighs on both alike; it prints "on/off", the on server's calls over the off
server's, with the quartiles of that ratio slice by slice, and the same for CPU per call.
``--same-build-twice`` makes both servers "off" (the measure's own spread), ``--traces`` gives
the on server traces (over OTLP to a sink),
``--on-settings NAME=VALUE,...`` (``--off-settings``) changes the on (off) server's settings,
to take a cost apart, and ``--on-tree PATH`` runs the on server from another checkout (with
``--same-build-twice``: two builds head to head, e.g. a branch against ``main``).

    .venv/bin/python scripts/bench_mcp.py                         # SQLite, 10 s per scenario, 8 and 32 connections
    .venv/bin/python scripts/bench_mcp.py --duration 5 --connections 8
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_mcp.py
    .venv/bin/python scripts/bench_mcp.py --soak 300               # memory soak: mixed load, RSS every 10 s
    .venv/bin/python scripts/bench_mcp.py --traces                 # the project with traces on (OTLP to a sink)
    .venv/bin/python scripts/bench_mcp.py --observability --scenarios get,save --connections 8

``make bench`` and ``make bench-pg`` run the first and third. wrk is the Debian package
``wrk``; when it is missing and this runs as root, it is installed with apt-get.
"""

import argparse
import datetime as dt
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
LUA = SCRIPTS / "bench_mcp.lua"
sys.path.insert(0, str(ROOT))

from tests.served import free_port, stop  # noqa: E402

# Share of the density codex's entries (per cent) -> the word that many of them hold. No word
# is a substring of another's or of the rest of the seeded text.
DENSITIES = {"0.01": "amberfly", "0.1": "birchwood", "1": "cedarpine", "10": "duneglass", "100": "emberstone"}
DENSITY_ENTRIES = 10_000
QUERIES = {f"query-{share}": word for share, word in DENSITIES.items()}
SCENARIOS = ["get", "save", "update", "search_tag", "search_query", *QUERIES]
LABELS = {
    "noop": "no-op tool (anchor)",
    "get": "get",
    "save": "save (fresh requestId)",
    "update": "update (tracked revision)",
    "search_tag": "search by tag (limit 20)",
    "search_query": "search by query (limit 20)",
    **{name: f"query, {share} % of 10,000" for name, share in zip(QUERIES, DENSITIES, strict=True)},
    "mixed": "mixed",
}
SEED_ENTRIES = 1_000


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("wrk is missing; installing the Debian package with apt-get", flush=True)
        install = ["apt-get", "install", "-y", "-q", "wrk"]
        if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL, check=False)
            subprocess.run(install, stdout=subprocess.DEVNULL, check=False)
        found = shutil.which("wrk")
    if not found:
        raise SystemExit("bench_mcp.py needs wrk: apt-get install wrk (or your system's package)")
    return found


def tree_pids(pid: int) -> list[int]:
    """A process and its descendants (uvicorn workers), children of any of its threads."""
    pids, stack = [], [pid]
    while stack:
        current = stack.pop()
        pids.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


def cpu_seconds_by_pid(pid: int) -> dict[int, float]:
    """User + system CPU seconds of a process and each of its descendants so far, by pid."""
    seconds = {}
    for one in tree_pids(pid):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime and stime: fields 14 and 15 of stat(5)
        seconds[one] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its descendants so far, in seconds."""
    return sum(cpu_seconds_by_pid(pid).values())


def tree_rss_mib(pid: int) -> float:
    """Resident memory of a process and its descendants (uvicorn workers), in MiB."""
    total = 0
    for one in tree_pids(pid):
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class Uvicorn:
    """One uvicorn server on a free port, optionally pinned to a CPU."""

    def __init__(
        self,
        app: list[str],
        *,
        workers: int,
        cpu: int | None,
        env: dict[str, str],
        stderr: Any = None,
        tree: Path = ROOT,
    ) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "uvicorn", *app, "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--workers", str(workers), "--log-level", "warning", "--no-access-log"]
        if cpu is not None:
            command = ["taskset", "-c", str(cpu), *command]
        self.process = subprocess.Popen(command, cwd=tree, env=env, stderr=stderr)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise SystemExit(f"uvicorn {app} did not start") from None
                time.sleep(0.1)
        time.sleep(0.5 * workers)  # let every worker finish importing before measuring

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def rss(self) -> float:
        return tree_rss_mib(self.process.pid)

    def cpu(self) -> float:
        return tree_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        stop(self.process)


def run_wrk(
    wrk: str, url: str, scenario: str, *, token: str, id_file: str, connections: int, duration: int, cpu: int | None
) -> dict[str, float]:
    command = [wrk, "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "30s", "-s", str(LUA), url, "--"]
    command += [scenario, token, id_file, uuid.uuid4().hex[:12]]
    if scenario in QUERIES:
        command.append(QUERIES[scenario])
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    output = subprocess.run(command, capture_output=True, text=True, check=False)
    match = re.search(r"^BENCH (.*)$", output.stdout, re.MULTILINE)
    if not match:
        print(output.stdout, output.stderr, file=sys.stderr)
        raise SystemExit(f"wrk did not report ({scenario}, {connections} connections)")
    figures = {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}
    figures["rate"] = figures["requests"] / (figures["duration_us"] / 1e6)
    return figures


# The local PostgreSQL server's postmaster, once found (``database_server_pid``).
DATABASE_PID: int | None = None


def measure(server: Uvicorn, wrk: str, scenario: str, **options) -> dict[str, float]:
    """One wrk run against ``server``, with the server's (and the database server's) CPU seconds per call."""
    before = server.cpu()
    database_before = cpu_seconds_by_pid(DATABASE_PID) if DATABASE_PID else {}
    figures = run_wrk(wrk, server.url, scenario, **options)
    figures["cpu_per_call"] = (server.cpu() - before) / max(figures["requests"], 1)
    if DATABASE_PID:
        # Backends and autovacuum workers come and go: count each process's own growth (all
        # of a new one's), so that one that ended during the slice takes nothing away.
        spent = 0.0
        for pid, seconds in cpu_seconds_by_pid(DATABASE_PID).items():
            earlier = database_before.get(pid, 0.0)
            spent += seconds - earlier if seconds >= earlier else seconds
        figures["db_cpu_per_call"] = spent / max(figures["requests"], 1)
    return figures


def database_server_pid() -> int | None:
    """The postmaster of the PostgreSQL server the project uses, where this machine runs it
    and the bench's role may read its ``data_directory``; None otherwise (and for SQLite,
    which works inside the project's own process)."""
    from django.db import DatabaseError, connections

    connection = connections["default"]
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('data_directory')")
            data_directory = cursor.fetchone()[0]
        return int(Path(data_directory, "postmaster.pid").read_text().split()[0])
    except (DatabaseError, OSError, ValueError, IndexError):
        return None
    finally:
        connections.close_all()


def database_column(figures: dict[str, float]) -> str:
    return f" {figures['db_cpu_per_call'] * 1000:9.2f}ms" if "db_cpu_per_call" in figures else ""


def summed(runs: list[dict[str, float]]) -> dict[str, float]:
    """One server's figures over its slices: calls/s and CPU per call (and the database
    server's, where every slice has it) over all of them, the median p50 and p99, and the
    errors."""
    requests = sum(run["requests"] for run in runs)

    def per_call(key: str) -> float:
        return sum(run[key] * run["requests"] for run in runs) / max(requests, 1)

    figures = {
        "rate": requests / (sum(run["duration_us"] for run in runs) / 1e6),
        "cpu_per_call": per_call("cpu_per_call"),
        "p50_us": statistics.median(run["p50_us"] for run in runs),
        "p99_us": statistics.median(run["p99_us"] for run in runs),
        "errors": sum(run["errors"] + run["socket_errors"] for run in runs),
    }
    if all("db_cpu_per_call" in run for run in runs):
        figures["db_cpu_per_call"] = per_call("db_cpu_per_call")
    return figures


def paired(slices: list[tuple[dict[str, float], dict[str, float]]]) -> dict[str, float]:
    """A scenario's figures over its (anchor, project) slices: the project's (``summed``),
    with the anchor's calls/s and CPU per call beside them."""
    anchor = summed([anchor for anchor, _ in slices])
    return summed([project for _, project in slices]) | {
        "anchor_rate": anchor["rate"],
        "anchor_cpu_per_call": anchor["cpu_per_call"],
    }


def setup_database(env: dict[str, str], *, densities: bool) -> tuple[str, list[str], list[str], str]:
    """Migrate, create the bench user and token, and seed entries through the services;
    with ``densities``, a second user, token and codex of ``DENSITY_ENTRIES`` entries too.

    Returns the token, the ids get reads, the ids update owns (one per possible
    connection, twice over, so a free entry always exists), and the density codex's token.
    """
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections

    from authserver.core.tokens import mint_access_token
    from notebook import services
    from notebook.validation import parse_entry_input

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    token = mint_access_token(user=user, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=6))
    codex = services.codex_for_user(user=user)
    ids = []
    for i in range(SEED_ENTRIES):
        words = "the rollback step" if i % 10 == 0 else "the launch checklist"
        entry = {"content": f"Seeded note {i} about {words}.", "tags": [f"t{i % 10}"]}
        ids.append(str(services.entry_save(codex=codex, request_id=f"seed-{i}", data=parse_entry_input(entry)).id))
    density_token = ""
    if densities:
        started = time.monotonic()
        reader = get_user_model().objects.create_user(f"bench-density-{uuid.uuid4().hex[:8]}")
        density_token = mint_access_token(user=reader, scopes=["notes:read"], lifetime=dt.timedelta(hours=6))
        density_codex = services.codex_for_user(user=reader)
        for i in range(DENSITY_ENTRIES):
            # Entry i holds the word of each share that divides it evenly (ids are random, so
            # the holders are spread evenly in id order).
            words = [word for share, word in DENSITIES.items() if i % round(100 / float(share)) == 0]
            entry = {"content": f"Density note {i} with {' and '.join(words)}.", "tags": [f"d{i % 10}"]}
            services.entry_save(codex=density_codex, request_id=f"density-{i}", data=parse_entry_input(entry))
        print(f"seeded the density codex ({DENSITY_ENTRIES:,} entries) in {time.monotonic() - started:.0f} s")
    if connections["default"].vendor == "postgresql":
        # The tables as autovacuum would leave them for a codex this size: the planner's
        # statistics (without them it plans for the empty tables migrate made, and a tag search
        # walks every entry), and the trigram indexes' pending lists merged (a search through
        # a GIN index reads its whole pending list: after the seeding's saves, thousands of rows).
        with connections["default"].cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    connections.close_all()
    return token, ids[:200], ids[200:], density_token


def write_id_file(path: str, ids: list[str]) -> None:
    """``id revision`` lines, revisions read fresh so a new wrk run starts in step."""
    from django.db import connections

    from notebook.models import Entry

    revisions = dict(Entry.objects.filter(id__in=ids).values_list("id", "revision"))
    connections.close_all()
    Path(path).write_text("".join(f"{i} {revisions[uuid.UUID(i)]}\n" for i in ids))


def soak(wrk: str, project: Uvicorn, *, token: str, id_file: str, connections: int, seconds: int, cpu) -> None:
    print(f"memory soak: {seconds} s of mixed load at {connections} connections, RSS every 10 s")
    samples = [project.rss()]
    result: dict[str, dict[str, float]] = {}

    def load() -> None:
        result["mixed"] = run_wrk(
            wrk,
            project.url,
            "mixed",
            token=token,
            id_file=id_file,
            connections=connections,
            duration=seconds,
            cpu=cpu,
        )

    worker = threading.Thread(target=load)
    worker.start()
    started = time.monotonic()
    while worker.is_alive():
        worker.join(timeout=10)
        samples.append(project.rss())
        print(f"  {time.monotonic() - started:5.0f} s  RSS {samples[-1]:7.1f} MiB", flush=True)
    figures = result.get("mixed", {})
    start, end, peak = samples[0], samples[-1], max(samples)
    # The first minutes include warm-up (lazy imports, caches); growth after the first
    # sample is the better hint of a leak.
    warm = samples[1] if len(samples) > 2 else start
    print(
        f"RSS start {start:.1f} MiB, end {end:.1f} MiB, max {peak:.1f} MiB, change {100 * (end - start) / start:+.1f}%"
        f" ({100 * (end - warm) / warm:+.1f}% from the 10 s sample)"
        f"; {figures.get('rate', 0):.0f} calls/s, errors {figures.get('errors', 0):.0f}"
    )


def otlp_sink() -> str:
    """An OTLP/HTTP endpoint on 127.0.0.1 that reads each export and answers 200: the
    project's traces cost everything but a collector's work (spans, batching, protobuf, HTTP)."""
    import http.server

    class Sink(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, or NaN when a slice counted nothing (a stalled machine)."""
    return numerator / denominator if denominator else float("nan")


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The lower quartile, the median and the upper quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, middle, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, middle, high


def drive(results: dict, server: "Uvicorn", wrk: str, scenario: str, duration: int, options: dict) -> None:
    """One slice of ``scenario`` against ``server``, its figures left in ``results``."""
    results[server] = measure(server, wrk, scenario, duration=duration, **options)


def compare_observability(off, on, wrk, args, scenarios, connection_counts, token, get_file, wrk_cpu) -> None:
    """The off and on servers under load at the same time, slice after slice.

    Each server has its own wrk with the same connections; both servers share CPU 0 and both
    wrk CPU 1. At every instant the two see the same machine, so its drift and anyone else's
    load weigh on both alike (alternating slices left runs of one build 10 to 20 % apart), and
    what one costs more per call, in CPU or in waiting, goes to the other as calls. "on/off"
    is the on server's calls over the off server's in all slices; the quartiles are of the
    ratio slice by slice; "cpu on/off" is the on server's CPU per call over the off server's.
    """
    print()
    print(
        f"{'scenario':<28} {'conns':>5} {'off/s':>9} {'on/s':>9} {'on/off':>7} "
        f"{'slices: q1':>10} {'median':>7} {'q3':>6} {'cpu on/off':>11} {'p99 off':>8} {'p99 on':>8} {'errors':>7}"
    )
    slice_seconds = max(1, round(args.duration / args.rounds))
    for connections in connection_counts:
        for scenario in scenarios:
            if scenario == "update":
                raise SystemExit("--observability measures get, save and the searches (update needs one server)")
            if scenario in QUERIES:
                raise SystemExit("--observability measures get, save and the searches of the first codex")
            options = dict(token=token, connections=connections, cpu=wrk_cpu, id_file=get_file)
            runs: dict[Uvicorn, list[dict[str, float]]] = {off: [], on: []}
            for round_number in range(args.rounds + 1):  # the first round warms both and is not counted
                duration = 1 if round_number == 0 else slice_seconds
                results: dict[Uvicorn, dict[str, float]] = {}
                threads = [
                    threading.Thread(target=drive, args=(results, server, wrk, scenario, duration, options))
                    for server in (off, on)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                if round_number:
                    for server in (off, on):
                        runs[server].append(results[server])
            ratios = [
                loud["requests"] / max(quiet["requests"], 1) for quiet, loud in zip(runs[off], runs[on], strict=True)
            ]
            low, middle, high = quartiles(ratios)
            quiet, loud = summed(runs[off]), summed(runs[on])
            print(
                f"{LABELS[scenario]:<28} {connections:>5} {quiet['rate']:9.1f} {loud['rate']:9.1f} "
                f"{ratio(loud['rate'], quiet['rate']):7.3f} {low:10.3f} {middle:7.3f} {high:6.3f} "
                f"{ratio(loud['cpu_per_call'], quiet['cpu_per_call']):11.3f} "
                f"{quiet['p99_us'] / 1000:8.1f} {loud['p99_us'] / 1000:8.1f} "
                f"{quiet['errors'] + loud['errors']:7.0f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=10, help="seconds of load per scenario and server (default 10)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="slices each scenario's duration is cut into, each paired with an anchor slice (default 5)",
    )
    parser.add_argument("--connections", default="8,32", help="comma-separated connection counts (default 8,32)")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers for both servers (default 1)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset of " + str(SCENARIOS))
    parser.add_argument("--soak", type=int, metavar="SECONDS", help="run only the memory soak, for SECONDS (e.g. 300)")
    parser.add_argument(
        "--traces", action="store_true", help="the project with OpenTelemetry traces on, sent to a sink"
    )
    parser.add_argument(
        "--observability",
        action="store_true",
        help="run the project with metrics and JSON logs off and on, under load at the same time, and compare",
    )
    parser.add_argument(
        "--same-build-twice",
        action="store_true",
        help="with --observability: both servers off (an A/A run, the measure's own spread)",
    )
    parser.add_argument(
        "--on-settings",
        default="",
        metavar="NAME=VALUE,...",
        help="with --observability: environment settings of the on server, over the defaults (to take costs apart)",
    )
    parser.add_argument(
        "--on-tree",
        metavar="PATH",
        help="with --observability: the on server runs the code of this checkout (two builds head to head)",
    )
    parser.add_argument(
        "--off-settings",
        default="",
        metavar="NAME=VALUE,...",
        help="with --observability: environment settings of the off server, over the defaults",
    )
    args = parser.parse_args()
    connection_counts = [int(count) for count in args.connections.split(",")]
    scenarios = [name for name in args.scenarios.split(",") if name]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {sorted(unknown)}")

    wrk = ensure_wrk()
    pinned = len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset") is not None
    server_cpu, wrk_cpu = (0, 1) if pinned else (None, None)

    var = tempfile.mkdtemp(prefix="codex-bench-")
    base_port = free_port()
    env = dict(
        os.environ,
        DJANGO_DEBUG="0",
        SECRET_KEY="bench-" + "k" * 50,
        CODEX_VAR_DIR=var,
        # Any port: Host is checked against ALLOWED_HOSTS (127.0.0.1), not the port.
        CODEX_PUBLIC_URL=f"http://127.0.0.1:{base_port}",
        CODEX_LOG_LEVEL="WARNING",
        # The per-token rate limit still counts every call, but must not refuse the load.
        CODEX_TOOL_CALLS_PER_MINUTE=os.environ.get("CODEX_TOOL_CALLS_PER_MINUTE", "1000000000"),
    )
    token, get_ids, update_ids, density_token = setup_database(env, densities=bool(set(scenarios) & set(QUERIES)))
    global DATABASE_PID
    DATABASE_PID = database_server_pid()
    get_file = os.path.join(var, "get-ids.txt")
    update_file = os.path.join(var, "update-ids.txt")
    Path(get_file).write_text("".join(f"{i} 1\n" for i in get_ids))
    update_ids = update_ids[: 2 * max(connection_counts)]

    database = os.environ.get("DATABASE_URL", "sqlite (temp file)").split("@")[-1]
    load = f"{args.soak} s soak" if args.soak else f"{args.duration} s per scenario in {args.rounds} paired slices"
    print(
        f"database: {database}; {load}; "
        f"uvicorn --workers {args.workers}; "
        + ("traces on (OTLP to a sink); " if args.traces else "")
        + ("servers on CPU 0, wrk on CPU 1" if pinned else "no CPU pinning (fewer than 2 CPUs or no taskset)")
    )
    if args.observability:
        if "DATABASE_URL" in os.environ:
            raise SystemExit("--observability runs on SQLite (each server gets its own copy of the database)")
        # Off: metrics off and the default plain lines (an access line per request, at INFO).
        quiet = {key: value for key, value in env.items() if key != "CODEX_LOG_FORMAT"}
        quiet.update(CODEX_METRICS="0", CODEX_LOG_LEVEL="INFO")
        loud = {**env, "CODEX_METRICS": "1", "CODEX_LOG_FORMAT": "json", "CODEX_LOG_LEVEL": "INFO"}
        if args.same_build_twice:
            loud = dict(quiet)  # an A/A run: how far the measure strays when nothing differs
        for server_env, settings in ((quiet, args.off_settings), (loud, args.on_settings)):
            for setting in filter(None, settings.split(",")):
                key, _, value = setting.partition("=")
                server_env[key] = value
        if args.traces:  # the on server's traces, over OTLP to a sink
            loud["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_sink()
        # Two servers writing one SQLite file would wait on each other's write lock.
        loud["CODEX_SQLITE_PATH"] = os.path.join(var, "codex-on.sqlite3")
        from codex_site.backup import sqlite_backup

        sqlite_backup(Path(var, "codex.sqlite3"), Path(loud["CODEX_SQLITE_PATH"]))
        log = open(os.path.join(var, "observability-on.log"), "wb")  # noqa: SIM115 (closed by exit)
        off_log = open(os.path.join(var, "observability-off.log"), "wb")  # noqa: SIM115 (closed by exit)
        off = Uvicorn(["codex_site.asgi:application"], workers=args.workers, cpu=server_cpu, env=quiet, stderr=off_log)
        on = Uvicorn(
            ["codex_site.asgi:application"],
            workers=args.workers,
            cpu=server_cpu,
            env=loud,
            stderr=log,
            tree=Path(args.on_tree) if args.on_tree else ROOT,
        )
        try:
            compare_observability(off, on, wrk, args, scenarios, connection_counts, token, get_file, wrk_cpu)
        finally:
            for server in (off, on):
                server.stop()
            print(f"the on server logged {os.path.getsize(log.name):,} bytes")
            shutil.rmtree(var, ignore_errors=True)
        return
    noop = Uvicorn(["--app-dir", str(SCRIPTS), "bench_noop_server:app"], workers=args.workers, cpu=server_cpu, env=env)
    project_env = dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=otlp_sink()) if args.traces else env
    project = Uvicorn(["codex_site.asgi:application"], workers=args.workers, cpu=server_cpu, env=project_env)
    try:
        print(f"RSS at start: no-op {noop.rss():.1f} MiB, project {project.rss():.1f} MiB")
        if args.soak:
            write_id_file(update_file, update_ids)
            soak(
                wrk,
                project,
                token=token,
                id_file=update_file,
                connections=connection_counts[-1],
                seconds=args.soak,
                cpu=wrk_cpu,
            )
            return
        print()
        print(
            f"{'scenario':<28} {'conns':>5} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'no-op/s':>9} "
            f"{'vs no-op':>9} {'cpu/call':>9} {'cpu vs no-op':>13} {'errors':>7}"
            + (f" {'db cpu/call':>11}" if DATABASE_PID else "")
        )
        slice_seconds = max(1, round(args.duration / args.rounds))
        for connections in connection_counts:
            for scenario in scenarios:
                id_file = update_file if scenario == "update" else get_file
                scenario_token = density_token if scenario in QUERIES else token
                options = dict(token=scenario_token, connections=connections, cpu=wrk_cpu)
                # Warm both servers (imports, caches, statements) before anything counts.
                measure(noop, wrk, "noop", id_file="-", duration=1, **options)
                if scenario == "update":
                    write_id_file(update_file, update_ids)
                measure(project, wrk, scenario, id_file=id_file, duration=1, **options)
                slices = []
                for _ in range(args.rounds):
                    anchor = measure(noop, wrk, "noop", id_file="-", duration=slice_seconds, **options)
                    if scenario == "update":
                        write_id_file(update_file, update_ids)
                    slices.append(
                        (anchor, measure(project, wrk, scenario, id_file=id_file, duration=slice_seconds, **options))
                    )
                figures = paired(slices)
                print(
                    f"{LABELS[scenario]:<28} {connections:>5} {figures['rate']:9.1f} {figures['p50_us'] / 1000:8.1f} "
                    f"{figures['p99_us'] / 1000:8.1f} {figures['anchor_rate']:9.1f} "
                    f"{ratio(figures['rate'], figures['anchor_rate']):9.3f} {figures['cpu_per_call'] * 1000:7.2f}ms "
                    f"{ratio(figures['anchor_cpu_per_call'], figures['cpu_per_call']):13.3f} {figures['errors']:7.0f}"
                    + database_column(figures),
                    flush=True,
                )
        print()
        print(f"RSS at end: no-op {noop.rss():.1f} MiB, project {project.rss():.1f} MiB")
    finally:
        noop.stop()
        project.stop()
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
