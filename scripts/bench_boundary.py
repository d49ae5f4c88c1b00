"""How a tool call should reach PostgreSQL: the sync boundary's thread hop against psycopg's async connection.

The project's tools run their database work in a worker thread (``mcp_endpoint.boundary``), one
hop per call. This measures that hop against staying on the event loop with psycopg's
``AsyncConnection``, in the smallest form that still has a database in it: the bare SDK anchor's
one tool reading one row by key with a prepared statement, over real HTTP, as a get does
(``scripts/bench_boundary_server.py``: ``none``, the anchor; ``thread``; ``async``, eight async
connections in a queue; ``pool``, psycopg_pool's ``AsyncConnectionPool`` of eight). Two more
modes give the SDK's own cost of a larger answer: ``answer`` returns a search by tag's answer
(twenty summaries) with no database, ``answer-thread`` after the hop and read. Each server
runs on CPU 0 and wrk on CPU 1 (``scripts/bench_mcp.py``'s harness); every slice of each mode
follows a slice of the others, and each mode's calls/s is given over the anchor's in the same
run, with the server's and the database server's CPU per call. Figures only; no pass/fail.

    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_boundary.py
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_boundary.py --connections 32 --rounds 6
"""

import argparse
import os
import sys
from pathlib import Path

import psycopg

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import bench_boundary_server as boundary  # noqa: E402
import bench_mcp  # noqa: E402

MODES = ["none", "thread", "async", "pool", "answer", "answer-thread"]


def seed(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE TABLE IF NOT EXISTS {boundary.TABLE} (id integer PRIMARY KEY, body text NOT NULL)")
        connection.execute(
            f"INSERT INTO {boundary.TABLE} SELECT n, repeat('x', 200) FROM generate_series(0, %s) AS n "
            "ON CONFLICT DO NOTHING",
            (boundary.ROWS - 1,),
        )


def database_server_pid(url: str) -> int | None:
    """The postmaster, where this machine runs the server and its data directory is readable."""
    try:
        with psycopg.connect(url) as connection:
            data_directory = connection.execute("SELECT current_setting('data_directory')").fetchone()[0]
        return int(Path(data_directory, "postmaster.pid").read_text().split()[0])
    except (psycopg.Error, OSError, ValueError, IndexError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (default 8)")
    parser.add_argument("--rounds", type=int, default=4, help="slices per mode (default 4)")
    parser.add_argument("--slice", type=int, default=3, help="seconds per slice (default 3)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated subset of {MODES} (none always runs)"
    )
    args = parser.parse_args()
    modes = ["none", *(mode for mode in args.modes.split(",") if mode and mode != "none")]
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown modes: {sorted(unknown)}")
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("bench_boundary.py needs DATABASE_URL naming a PostgreSQL database (scripts/with_postgres.sh)")

    wrk = bench_mcp.ensure_wrk()
    pinned = len(os.sched_getaffinity(0)) >= 2
    server_cpu, wrk_cpu = (0, 1) if pinned else (None, None)
    seed(url)
    bench_mcp.DATABASE_PID = database_server_pid(url)
    app = ["--app-dir", str(SCRIPTS), "bench_boundary_server:app"]
    servers = {
        mode: bench_mcp.Uvicorn(app, workers=1, cpu=server_cpu, env=dict(os.environ, BENCH_BOUNDARY=mode))
        for mode in modes
    }
    options = dict(token="-", id_file="-", connections=args.connections, cpu=wrk_cpu)
    try:
        for server in servers.values():  # warm-up: connections opened, statements prepared
            bench_mcp.measure(server, wrk, "noop", duration=1, **options)
        slices: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode, server in servers.items():
                slices[mode].append(bench_mcp.measure(server, wrk, "noop", duration=args.slice, **options))
    finally:
        for server in servers.values():
            server.stop()

    figures = {mode: bench_mcp.summed(runs) for mode, runs in slices.items()}
    anchor = figures["none"]
    print(f"one row by key, {args.connections} connections, {args.rounds} x {args.slice} s per mode")
    print(
        f"{'mode':<13} {'calls/s':>9} {'vs no-op':>9} {'p50 ms':>7} {'p99 ms':>7} {'cpu/call':>9} {'db cpu/call':>12}"
    )
    for mode, row in figures.items():
        database = f"{row['db_cpu_per_call'] * 1000:10.3f}ms" if "db_cpu_per_call" in row else f"{'-':>12}"
        print(
            f"{mode:<13} {row['rate']:9.1f} {bench_mcp.ratio(row['rate'], anchor['rate']):9.3f} "
            f"{row['p50_us'] / 1000:7.2f} {row['p99_us'] / 1000:7.2f} {row['cpu_per_call'] * 1000:7.3f}ms {database}"
            + (f"  errors {row['errors']:.0f}" if row["errors"] else "")
        )


if __name__ == "__main__":
    main()
