"""The measured inputs of the capacity model (docs/capacity.md), on PostgreSQL: one table.

    make bench-capacity                                     # everything: the per-call figures, then 1,000,000 entries
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_capacity.py --entries 100000
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_capacity.py --entries 0   # per-call figures only

The server's durability is production's for the whole run (``fsync``, ``synchronous_commit`` and
``full_page_writes`` on: scripts/with_postgres.sh turns them off for speed). Notes are
``--note-bytes`` long (docs/capacity.md's assumption), cut from this project's own docs, so
that their trigrams are those of real prose. How each input is measured:

- **app CPU per call**: the uvicorn worker's user and system CPU time (``/proc/<pid>/stat``,
  utime + stime) over a wrk run of one tool (``scripts/bench_mcp.lua``, every answer checked),
  divided by the calls answered. CPU time is what the calls cost, whatever else the machine is
  doing; a busy machine stretches the run, not the CPU each call takes.
- **db CPU per call**: the same, over every process of the PostgreSQL server (its backends,
  WAL writer, checkpointer, autovacuum), over the same run.
- **round trips per call**: libpq's trace of one call made in this process (``tests.wire``),
  once its statements are prepared, as in steady use: the server's answers that end in
  ReadyForQuery, the token check included (a request's own check: one per call).
- **WAL per call**: ``pg_current_wal_lsn()`` before and after the wrk run, over its calls.
- **WAL per save and per update at scale**: the same, over saves and then updates made in
  this process into random codexes of the filled database right after a ``CHECKPOINT``, when
  every page a write touches is written whole once (a full-page image): an upper bound on a
  write's WAL. ``pg_waldump --stats`` splits it into records and full-page images.
- **bytes per entry**: ``pg_total_relation_size`` (heap, TOAST and every index) of each
  notebook table, after filling ``--entries`` entries over ``--codexes`` codexes (each with its
  revision 1, request key, two tags and a related agent, as a save writes them), over the
  entries; a further revision's bytes from the revision table alone. The B-tree indexes grow
  row by row during the fill, codexes interleaved, as many people writing at once grow them;
  the trigram index is built after the fill (as ``scripts/bench_scale.py`` does).
- **connections**: the server's client backends after the load, all of them the one
  worker's (Django keeps a connection per worker thread, ``CONN_MAX_AGE``).
"""

import argparse
import datetime as dt
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(SCRIPTS))

import bench_mcp  # noqa: E402
import bench_scale  # noqa: E402

from tests.served import free_port  # noqa: E402

# (label, bench_mcp.lua scenario): the tools, a search by tag and by a word in a tenth of the notes.
TOOLS = [
    ("get", "get"),
    ("save", "save"),
    ("update", "update"),
    ("search, tag", "search_tag"),
    ("search, query", "search_query"),
]
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def corpus() -> str:
    """This project's docs as one line of plain text with no character a JSON string escapes."""
    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))]
    texts.append((ROOT / "README.md").read_text(encoding="utf-8"))
    text = " ".join(texts)
    text = re.sub(r"[^\x20-\x7e]", " ", text).replace('"', "'").replace("\\", "/")
    return re.sub(r"\s+", " ", text)


def note(text: str, size: int, rng: random.Random) -> str:
    start = rng.randrange(0, len(text) - size)
    return text[start : start + size]


def execute(sql: str, params: Any = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def make_durable() -> None:
    """Production's durability on the throwaway cluster, for the rest of the run."""
    for name, value in DURABLE.items():
        execute(f"ALTER SYSTEM SET {name} = '{value}'")
    execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while any(execute(f"SELECT current_setting('{name}')")[0][0] != value for name, value in DURABLE.items()):
        if time.monotonic() > deadline:
            raise SystemExit("the server did not take the durability settings")
        time.sleep(0.1)


def wal_lsn() -> str:
    return execute("SELECT pg_current_wal_lsn()")[0][0]


def wal_bytes(start: str, end: str) -> int:
    return int(execute("SELECT pg_wal_lsn_diff(%s, %s)", [end, start])[0][0])


def wal_split(start: str, end: str, *, by_record: bool = False) -> dict[str, tuple[int, int]] | None:
    """The WAL between two positions by resource manager (``Heap``, ``Btree``, ``Gin``, ...,
    and ``Total``; ``by_record``: by record type, ``Gin/INSERT``, ...): (record bytes, full-page
    image bytes), by ``pg_waldump --stats``; None where pg_waldump or the log is out of reach."""
    data_directory = execute("SELECT current_setting('data_directory')")[0][0]
    bindir = execute("SELECT setting FROM pg_config WHERE name = 'BINDIR'")
    waldump = shutil.which("pg_waldump") or (str(Path(bindir[0][0], "pg_waldump")) if bindir else None)
    if waldump is None or not Path(waldump).exists():
        return None
    stats = "--stats=record" if by_record else "--stats"
    command = [waldump, stats, "-p", str(Path(data_directory, "pg_wal")), "-s", start, "-e", end]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = {}
    for line in done.stdout.splitlines():
        # Name  N (n%)  record-size (r%)  fpi-size (f%)  combined-size (c%); Total's with [%].
        fields = re.match(r"^([\w/]+)\s+(\d+)\s+(?:\([\s\d.]+\)\s+)?(\d+)\s+[(\[][\s\d.%]+[)\]]\s+(\d+)\s+[(\[]", line)
        if fields:
            found[fields.group(1)] = int(fields.group(3)), int(fields.group(4))
    return found if "Total" in found else None


def per_call_figures(args, text: str) -> tuple[dict[str, dict[str, float]], int, int]:
    """Each tool under wrk: app and db CPU per call, WAL per call; and the connections held."""
    wrk = bench_mcp.ensure_wrk()
    pinned = len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset") is not None
    server_cpu, wrk_cpu = (0, 1) if pinned else (None, None)
    var = tempfile.mkdtemp(prefix="codex-capacity-")
    env = dict(
        os.environ,
        DJANGO_DEBUG="0",
        SECRET_KEY="bench-" + "k" * 50,
        CODEX_VAR_DIR=var,
        CODEX_PUBLIC_URL=f"http://127.0.0.1:{free_port()}",
        CODEX_LOG_LEVEL="WARNING",
        CODEX_TOOL_CALLS_PER_MINUTE="1000000000",
    )
    token, get_ids, update_ids, _ = bench_mcp.setup_database(env, densities=False)
    make_durable()
    bench_mcp.DATABASE_PID = bench_mcp.database_server_pid()
    if bench_mcp.DATABASE_PID is None:
        raise SystemExit("bench_capacity.py needs the PostgreSQL server on this machine, its data directory readable")
    # Each save and update sends a stretch of the corpus from a random place (bench_mcp.lua).
    Path(var, "corpus.txt").write_text(text, encoding="ascii")
    os.environ["BENCH_CONTENT_FILE"] = str(Path(var, "corpus.txt"))
    os.environ["BENCH_NOTE_BYTES"] = str(args.note_bytes)
    get_file, update_file = os.path.join(var, "get-ids.txt"), os.path.join(var, "update-ids.txt")
    Path(get_file).write_text("".join(f"{i} 1\n" for i in get_ids))
    update_ids = update_ids[: 2 * args.connections]
    project = bench_mcp.Uvicorn(["codex_site.asgi:application"], workers=1, cpu=server_cpu, env=env)
    figures: dict[str, dict[str, float]] = {}
    try:
        for label, scenario in TOOLS:
            options = dict(token=token, connections=args.connections, cpu=wrk_cpu)
            id_file = update_file if scenario == "update" else get_file
            if scenario == "update":
                bench_mcp.write_id_file(update_file, update_ids)
            bench_mcp.measure(project, wrk, scenario, id_file=id_file, duration=1, **options)  # warm
            slices, wal = [], 0
            for _ in range(args.rounds):
                if scenario == "update":
                    bench_mcp.write_id_file(update_file, update_ids)
                start = wal_lsn()
                run = bench_mcp.measure(
                    project, wrk, scenario, id_file=id_file, duration=max(1, args.duration // args.rounds), **options
                )
                wal += wal_bytes(start, wal_lsn())
                slices.append(run)
            summed = bench_mcp.summed(slices)
            calls = sum(run["requests"] for run in slices)
            figures[label] = summed | {"calls": calls, "wal_per_call": wal / max(calls, 1)}
            print(
                f"  {label:<15} {summed['rate']:8.0f} calls/s, app {summed['cpu_per_call'] * 1000:.2f} ms,"
                f" db {summed['db_cpu_per_call'] * 1000:.2f} ms, WAL {wal / max(calls, 1):.0f} B per call,"
                f" {summed['errors']:.0f} errors",
                flush=True,
            )
        held = execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )[0][0]
    finally:
        project.stop()
        shutil.rmtree(var, ignore_errors=True)
    return figures, held, token


def round_trips(token: str, text: str, note_bytes: int) -> dict[str, int]:
    """Round trips of each tool's call in steady use (module docstring)."""
    from unittest import mock

    from django.conf import settings
    from oauth2_provider.models import get_access_token_model

    from authserver.core import last_used
    from mcp_endpoint import server
    from mcp_endpoint.auth import RequestToken, token_checksum
    from tests.wire import round_trips as counted

    checksum = token_checksum(token)
    access = get_access_token_model().objects.get(token_checksum=checksum)
    # The last use is written once a minute per person and application: not a call's own.
    moment = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    uses = last_used.LastUsed(clock=lambda: moment)
    uses.touch(access.user_id, access.application_id)
    rng = random.Random(2)
    found: dict[str, int] = {}
    with (
        mock.patch.object(last_used, "LAST_USED", uses),
        mock.patch.object(settings, "CODEX_TOOL_CALLS_PER_MINUTE", 10**9),
    ):

        def execute(name: str, arguments: dict) -> dict:
            return server._execute(name, arguments, RequestToken(checksum))  # one request's token

        saved = execute("field_notes_save", {"requestId": f"rt-{uuid.uuid4()}", "entry": {"content": "x"}})
        revision = [saved["entry"]["revision"]]

        def update() -> None:
            entry = {"content": note(text, note_bytes, rng)}
            arguments = {"id": saved["entry"]["id"], "expectedRevision": revision[0], "entry": entry}
            revision[0] = execute("field_notes_update", arguments)["entry"]["revision"]

        def save() -> None:
            execute(
                "field_notes_save",
                {"requestId": f"rt-{uuid.uuid4()}", "entry": {"content": note(text, note_bytes, rng)}},
            )

        calls = {
            "get": lambda: execute("field_notes_get", {"id": saved["entry"]["id"]}),
            "save": save,
            "update": update,
            "search, tag": lambda: execute("field_notes_search", {"tag": "t3", "limit": 20}),
            "search, query": lambda: execute("field_notes_search", {"query": "rollback", "limit": 20}),
        }
        for label, call in calls.items():
            for _ in range(3):  # past the threshold at which its statements are prepared
                found[label] = counted(call)
    return found


# Distinct notes the fill cuts from the corpus: each codex's notes are mostly distinct ones.
WINDOWS = 20_000


def fill(entries: int, codexes: int, note_bytes: int, text: str) -> list[int]:
    """``entries`` notes over ``codexes`` new codexes, interleaved, as a save writes them."""
    from django.contrib.auth import get_user_model

    from notebook.models import Codex

    User = get_user_model()
    tag = uuid.uuid4().hex[:8]
    users = User.objects.bulk_create([User(username=f"capacity-{tag}-{n}") for n in range(codexes)])
    ids = [codex.pk for codex in Codex.objects.bulk_create([Codex(owner=user) for user in users])]
    drop, create = bench_scale.trigram_index_statements("codex-keys")
    rng = random.Random(4)
    windows = [note(text, note_bytes, rng) for _ in range(WINDOWS)]
    params = {"codexes": ids, "n": entries, "windows": windows}
    statements = [
        *drop,
        "DROP TABLE IF EXISTS bench_gen",
        "DROP TABLE IF EXISTS bench_windows",
        # Notes cut at random places of the corpus, by number (one window per row: a note is
        # never cut from the whole corpus row by row, which would read it whole each time).
        "CREATE TEMP TABLE bench_windows AS SELECT k - 1 AS k, body"
        " FROM unnest(%(windows)s::text[]) WITH ORDINALITY AS w (body, k)",
        "CREATE TEMP TABLE bench_gen AS SELECT i, gen_random_uuid() AS id,"
        " (%(codexes)s::bigint[])[1 + i %% cardinality(%(codexes)s::bigint[])] AS codex"
        " FROM generate_series(1, %(n)s) AS i",
        f"""
        INSERT INTO notebook_entry (id, codex_id, revision, title, content, content_bytes, tags,
            related_agent_ids, provenance, search_title, search_content, search_tags, search_tags_text,
            created_at, updated_at, write_seq)
        SELECT id, codex, 1, title, content, octet_length(content), tags, agents, NULL,
            coalesce(lower(title), ''), lower(content), tags,
            array_to_string(ARRAY(SELECT jsonb_array_elements_text(tags)), E'\\n'),
            now() - interval '1 day', now() - interval '1 day', i
        FROM (
            SELECT g.i, g.id, g.codex,
                CASE WHEN g.i %% 3 = 0 THEN NULL ELSE left(t.body, 60) END AS title,
                c.body AS content,
                jsonb_build_array('t' || (g.i %% 10), 'topic-' || (g.i %% 1000)) AS tags,
                jsonb_build_array('agent-' || (g.i %% 100)) AS agents
            FROM bench_gen g
            JOIN bench_windows c ON c.k = (g.i::bigint * 7919) %% {WINDOWS}
            JOIN bench_windows t ON t.k = (g.i::bigint * 104729) %% {WINDOWS}
            ORDER BY g.i
        ) AS generated
        """,
        "INSERT INTO notebook_entrytag (codex_id, entry_id, value) SELECT e.codex_id, e.id,"
        " jsonb_array_elements_text(e.tags) FROM notebook_entry e JOIN bench_gen g ON g.id = e.id ORDER BY g.i",
        "INSERT INTO notebook_entryrelatedagent (codex_id, entry_id, value) SELECT e.codex_id, e.id,"
        " jsonb_array_elements_text(e.related_agent_ids) FROM notebook_entry e JOIN bench_gen g ON g.id = e.id"
        " ORDER BY g.i",
        "INSERT INTO notebook_entryrevision (codex_id, entry_id, revision, title, content, tags, related_agent_ids,"
        " provenance, recorded_at, writer_kind, writer_client_id, writer_name, writer_scopes)"
        " SELECT e.codex_id, e.id, 1, e.title, e.content, e.tags, e.related_agent_ids, NULL, e.created_at,"
        " 'unknown', '', '', '' FROM notebook_entry e JOIN bench_gen g ON g.id = e.id ORDER BY g.i",
        "INSERT INTO notebook_requestkey (codex_id, request_id, fingerprint, entry_id, created_at)"
        " SELECT g.codex, 'fill-' || g.i, md5(g.id::text) || md5(g.i::text), g.id, now() FROM bench_gen g ORDER BY g.i",
        "UPDATE notebook_codex c SET entry_count = totals.entries, last_write_seq = totals.last_seq"
        " FROM (SELECT codex_id, count(*) AS entries, max(write_seq) AS last_seq FROM notebook_entry"
        " GROUP BY codex_id) AS totals WHERE totals.codex_id = c.id",
        "SET maintenance_work_mem = '512MB'",
        *create,
        "DROP TABLE bench_gen",
        "DROP TABLE bench_windows",
        "VACUUM ANALYZE",
    ]
    from django.db import connection

    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement, params if "%" in statement else None)
    return ids


NOTEBOOK_TABLES = ["notebook_entry", "notebook_entryrevision", "notebook_entrytag", "notebook_entryrelatedagent"]
NOTEBOOK_TABLES += ["notebook_requestkey", "notebook_codex"]


def sizes() -> dict[str, tuple[int, int]]:
    """Each notebook table's (rows, bytes on disk with TOAST and every index)."""
    found = {}
    for table in NOTEBOOK_TABLES:
        rows = execute(f"SELECT count(*) FROM {table}")[0][0]
        found[table] = rows, execute("SELECT pg_total_relation_size(%s)", [table])[0][0]
    return found


def database_seconds(since: dict[int, float]) -> float:
    """CPU seconds every process of the PostgreSQL server spent since ``since`` (a snapshot of
    ``bench_mcp.cpu_seconds_by_pid``), as ``bench_mcp.measure`` counts them."""
    spent = 0.0
    for pid, seconds in bench_mcp.cpu_seconds_by_pid(bench_mcp.DATABASE_PID).items():
        earlier = since.get(pid, 0.0)
        spent += seconds - earlier if seconds >= earlier else seconds
    return spent


def parts_of(table: str) -> list[tuple[str, int]]:
    """A table's heap (with its TOAST) and each of its indexes, with their bytes on disk."""
    heap = execute("SELECT pg_table_size(%s)", [table])[0][0]
    indexes = execute(
        "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
        " WHERE indrelid = %s::regclass ORDER BY 2 DESC",
        [table],
    )
    return [("heap and TOAST", heap), *indexes]


def cold_writes(ids: list[int], writes: int, note_bytes: int, text: str) -> dict[str, tuple[int, Any, float]]:
    """``writes`` saves into random codexes, then as many updates of them, each batch right
    after a CHECKPOINT: (WAL bytes, its split by ``wal_split`` or None, the database's CPU seconds)."""
    from notebook import services
    from notebook.models import Codex
    from notebook.validation import parse_entry_input

    rng = random.Random(3)
    codexes = Codex.objects.in_bulk(ids)
    chosen = [codexes[rng.choice(ids)] for _ in range(writes)]
    found = {}
    saved = []
    execute("CHECKPOINT")
    start, cpu = wal_lsn(), bench_mcp.cpu_seconds_by_pid(bench_mcp.DATABASE_PID)
    for number, codex in enumerate(chosen):
        data = parse_entry_input({"content": note(text, note_bytes, rng), "tags": [f"t{number % 10}", "fresh"]})
        saved.append(services.entry_save(codex=codex, request_id=f"cold-{uuid.uuid4()}", data=data))
    end = wal_lsn()
    found["save"] = wal_bytes(start, end), wal_split(start, end), database_seconds(cpu)
    found["save, by record"] = 0, wal_split(start, end, by_record=True), 0.0
    execute("CHECKPOINT")
    start, cpu = wal_lsn(), bench_mcp.cpu_seconds_by_pid(bench_mcp.DATABASE_PID)
    for entry, codex in zip(saved, chosen, strict=True):
        data = parse_entry_input({"content": note(text, note_bytes, rng), "tags": ["t1", "fresh"]})
        services.entry_update(codex=codex, entry_id=entry.id, expected_revision=1, data=data)
    end = wal_lsn()
    found["update"] = wal_bytes(start, end), wal_split(start, end), database_seconds(cpu)
    return found


# The model's assumptions about use, each with its source in docs/capacity.md.
MESSAGES_PER_DAY = 3e9 / 700e6  # a person's messages to their assistant a day
CALLS_PER_MESSAGE = 3  # a search, a get and a save or update (the tool reference's workflow)
MIX = {"get": 1 / 3, "search, query": 1 / 3, "save": 1 / 6, "update": 1 / 6}
PEAK_TO_MEAN = 1.7  # the busiest second's calls over the day's average, a worldwide population
STANDBYS = 2  # Patroni's synchronous standby and replica (docs/deploy.md)
THREADS_PER_WORKER = min(32, 8 + 4)  # a uvicorn worker's thread pool on an 8-core application host
SIZES = (10_000, 1_000_000, 10_000_000)


def model(
    per_call: dict[str, dict[str, float]], writes: dict[str, tuple[float, float, float]], stored: tuple[float, float]
) -> list[dict[str, float]]:
    """docs/capacity.md's formulas at each of ``SIZES``. ``per_call``: each tool's app and db CPU
    seconds per call; ``writes``: for save and update, (db CPU seconds, WAL bytes of records,
    WAL bytes with full-page images) each; ``stored``: (bytes per entry, bytes per further revision)."""
    calls_per_day = MESSAGES_PER_DAY * CALLS_PER_MESSAGE
    app = sum(per_call[tool]["cpu_per_call"] * share for tool, share in MIX.items())
    db = sum(
        (writes[tool][0] if tool in writes else per_call[tool]["db_cpu_per_call"]) * share
        for tool, share in MIX.items()
    )
    records = sum(writes[tool][1] * MIX[tool] for tool in writes)
    with_images = sum(writes[tool][2] * MIX[tool] for tool in writes)
    entry_bytes, revision_bytes = stored
    rows = []
    for people in SIZES:
        peak = people * calls_per_day * PEAK_TO_MEAN / 86_400
        app_cores = peak * app
        rows.append(
            {
                "people": people,
                "calls_per_second": peak,
                "app_cores": app_cores,
                "db_cores": peak * db,
                "stored_bytes_per_year": people
                * calls_per_day
                * 365
                * (MIX["save"] * entry_bytes + MIX["update"] * revision_bytes),
                "wal_per_second": (peak * records, peak * with_images),
                "replica_per_second": (peak * records * STANDBYS, peak * with_images * STANDBYS),
                "connections": math.ceil(app_cores) * THREADS_PER_WORKER,
            }
        )
    return rows


def print_model(rows: list[dict[str, float]]) -> None:
    print(
        f"{'people':>11} {'calls/s':>8} {'app cores':>10} {'db cores':>9} {'stored/year':>12}"
        f" {'WAL/s':>17} {'to standbys':>17} {'connections':>12}"
    )
    for row in rows:
        low, high = row["wal_per_second"]
        to_low, to_high = row["replica_per_second"]
        print(
            f"{row['people']:>11,} {row['calls_per_second']:8.0f} {row['app_cores']:10.1f} {row['db_cores']:9.1f}"
            f" {row['stored_bytes_per_year'] / 1e12:9.2f} TB {low / 1e6:6.1f}-{high / 1e6:6.1f} MB/s"
            f" {to_low / 1e6:6.1f}-{to_high / 1e6:6.1f} MB/s {row['connections']:12,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk load per tool (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="slices each tool's load is cut into (default 5)")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (default 8)")
    parser.add_argument("--note-bytes", type=int, default=800, help="each note's length (default 800)")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the fill (0: none)")
    parser.add_argument("--codexes", type=int, default=1_000, help="codexes the fill spreads them over")
    parser.add_argument("--writes", type=int, default=2_000, help="saves (and updates) whose WAL is measured at scale")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("bench_capacity.py needs PostgreSQL: run it under scripts/with_postgres.sh")
    text = corpus()

    print(
        f"per call: {args.duration} s of wrk load per tool at {args.connections} connections,"
        f" notes of {args.note_bytes} bytes"
    )
    figures, held, token = per_call_figures(args, text)
    trips = round_trips(token, text, args.note_bytes)
    version = execute("SHOW server_version")[0][0]
    cpus = os.cpu_count()

    scale = None
    if args.entries:
        started = time.monotonic()
        print(f"filling {args.entries:,} entries over {args.codexes:,} codexes ...", flush=True)
        ids = fill(args.entries, args.codexes, args.note_bytes, text)
        filled = sizes()
        print(f"  filled and indexed in {time.monotonic() - started:.0f} s", flush=True)
        scale = filled, cold_writes(ids, args.writes, args.note_bytes, text)

    print()
    print(
        f"Measured inputs: PostgreSQL {version}, {cpus} CPUs (shared: CPU figures are upper bounds), one uvicorn worker"
    )
    print(f"{'tool':<15} {'app CPU/call':>13} {'db CPU/call':>12} {'round trips':>12} {'WAL/call':>9} {'calls':>8}")
    for label, _ in TOOLS:
        one = figures[label]
        print(
            f"{label:<15} {one['cpu_per_call'] * 1000:10.3f} ms {one['db_cpu_per_call'] * 1000:9.3f} ms"
            f" {trips[label]:>12} {one['wal_per_call']:7.0f} B {one['calls']:8.0f}"
        )
    mix = {"get": 1 / 3, "search, query": 1 / 3, "save": 1 / 6, "update": 1 / 6}
    app = sum(figures[label]["cpu_per_call"] * share for label, share in mix.items())
    db = sum(figures[label]["db_cpu_per_call"] * share for label, share in mix.items())
    print(
        f"{'mix (docs)':<15} {app * 1000:10.3f} ms {db * 1000:9.3f} ms"
        "   (a third gets, a third searches, a sixth saves, a sixth updates)"
    )
    executor = min(32, (cpus or 1) + 4)
    print(
        f"connections a worker holds: {held} after the load (its thread pool: min(32, CPUs + 4) = {executor} threads)"
    )
    if scale is not None:
        filled, cold = scale
        entries = filled["notebook_entry"][0]
        per_entry = sum(size for table, (_, size) in filled.items() if table != "notebook_codex") / entries
        revisions, revision_bytes = filled["notebook_entryrevision"]
        print(
            f"bytes on disk at {entries:,} entries ({args.codexes:,} codexes, notes of {args.note_bytes} bytes), every"
            f" index: {per_entry:,.0f} B per entry (a further revision: {revision_bytes / revisions:,.0f} B)"
        )
        for table, (rows, size) in filled.items():
            print(f"  {table:<28} {rows:>10,} rows {size / 2**20:10.1f} MiB {size / entries:8.0f} B per entry")
        for name, size in parts_of("notebook_entry"):
            print(f"    {name:<40} {size / 2**20:10.1f} MiB {size / entries:8.0f} B per entry")
        for kind, (total, split, seconds) in cold.items():
            if kind.endswith("by record"):
                if split:
                    largest = sorted((name for name in split if name != "Total"), key=lambda name: -sum(split[name]))
                    parts = ", ".join(f"{name} {sum(split[name]) / args.writes:,.0f} B" for name in largest[:4])
                    print(f"  a save's WAL by record type: {parts}")
                continue
            print(
                f"a {kind} at that scale, into a random codex right after a checkpoint: db CPU"
                f" {seconds / args.writes * 1000:.2f} ms, WAL {total / args.writes:,.0f} B",
                end="",
            )
            if split:
                records, images = split["Total"]
                largest = sorted((name for name in split if name != "Total"), key=lambda name: -sum(split[name]))
                parts = ", ".join(f"{name} {sum(split[name]) / args.writes:,.0f} B" for name in largest[:3])
                print(
                    f" ({records / args.writes:,.0f} B records + {images / args.writes:,.0f} B full-page images;"
                    f" most by {parts})",
                    end="",
                )
            print()
        writes = {
            kind: (
                seconds / args.writes,
                split["Total"][0] / args.writes if split else total / args.writes,
                total / args.writes,
            )
            for kind, (total, split, seconds) in cold.items()
            if kind in ("save", "update")
        }
        print()
        print("The model (docs/capacity.md: its formulas and assumptions), from these inputs; WAL: records alone to")
        print("records with every page a write touches written whole (right after a checkpoint):")
        print_model(model(figures, writes, (per_entry, revision_bytes / revisions)))


if __name__ == "__main__":
    main()
