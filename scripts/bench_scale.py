"""Search and write latency in one very large codex, on PostgreSQL (figures only, no pass/fail).

Fills one codex with N entries (default 1,000,000) in a few SQL statements
(generate_series: entries with their search_* columns, tag rows, agent rows, revision 1,
request keys), plants a rare word, a rare tag and a rare related agent in exactly 10
entries, and fills a small codex (1,000 entries) alike for comparison. Then it times the
service and selector functions themselves (no HTTP) and prints p50/max per operation,
how many calls an agent needs to list every entry holding the rare word, tag or agent,
and EXPLAIN ANALYZE of the rare searches' candidate queries.

--others N adds the multi-tenant case: N more entries spread over --other-codexes codexes
(other people on the same server), where the large codex's rare word is common (in every
other entry). The large codex's "rare query" then measures a word rare in mine but common
elsewhere, which must cost what the large codex holds, not what the server holds.
The entries of all codexes are then rewritten in random order, as many people writing at
once leave them (--in-fill-order: each codex's together, as the fill makes them). --trigram
builds migration 0009's codex trigram keys (the default), or for comparison the indexes they
replaced: migration 0002's (codex_id, column) indexes, or the whole-table ones before those.

    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_scale.py
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_scale.py --entries 100000 --repeat 30
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_scale.py --others 1000000
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_scale.py --metrics-only

Every run also times the Prometheus scrape: ``python -m codex_site.serve`` on the filled
database and ``GET /metrics`` over HTTP (``--metrics-only``: nothing else).
"""

import argparse
import importlib
import itertools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RARE_WORD = "zyxwvutsr"
RARE_TAG = "rare-tag"
RARE_AGENT = "agent-rare"
COMMON_WORD = "launch"  # in half the entries
COMMON_TAG = "t3"  # in a tenth
PLANTED = 10

# One statement per table. %(codex)s, %(n)s and %(every)s are bound by the driver; an
# entry is "planted" (rare word, tag and agent) when i % every == 7: exactly 10 of them.
FILL = [
    "DROP TABLE IF EXISTS bench_gen",
    "CREATE TEMP TABLE bench_gen AS SELECT i, gen_random_uuid() AS id, (i %% %(every)s = 7) AS planted "
    "FROM generate_series(1, %(n)s) AS i",
    """
    INSERT INTO notebook_entry (id, codex_id, revision, title, content, content_bytes, tags,
        related_agent_ids, provenance, search_title, search_content, search_tags, search_tags_text,
        created_at, updated_at, write_seq)
    SELECT id, %(codex)s, 1, title, content, octet_length(content), tags, agents, NULL,
        coalesce(lower(title), ''), lower(content), tags,
        array_to_string(ARRAY(SELECT jsonb_array_elements_text(tags)), E'\\n'),
        now() - interval '1 day', now() - interval '1 day', i
    FROM (
        SELECT i, id,
            CASE WHEN i %% 3 = 0 THEN NULL ELSE format('Note %%s on the %%s', i, (ARRAY['Pump', 'Valve', 'Relay',
                'Gauge', 'Fan'])[1 + i %% 5]) END AS title,
            format('Field note %%s: %%s of the %%s unit, checked by crew %%s; readings nominal.%%s', i,
                CASE WHEN i %% 2 = 0 THEN 'launch' ELSE 'deploy' END,
                (ARRAY['north', 'south', 'east', 'west', 'central', 'harbour', 'summit'])[1 + i %% 7],
                i %% 97, CASE WHEN planted THEN ' %(rare_word)s' ELSE '' END) AS content,
            jsonb_build_array('t' || (i %% 10), 'topic-' || (i %% 1000))
                || CASE WHEN planted THEN jsonb_build_array(%(rare_tag)s) ELSE '[]'::jsonb END AS tags,
            jsonb_build_array('agent-' || (i %% 100))
                || CASE WHEN planted THEN jsonb_build_array(%(rare_agent)s) ELSE '[]'::jsonb END AS agents
        FROM bench_gen
    ) AS generated
    """,
    "INSERT INTO notebook_entrytag (codex_id, entry_id, value) "
    "SELECT codex_id, id, jsonb_array_elements_text(tags) FROM notebook_entry WHERE codex_id = %(codex)s",
    "INSERT INTO notebook_entryrelatedagent (codex_id, entry_id, value) "
    "SELECT codex_id, id, jsonb_array_elements_text(related_agent_ids) FROM notebook_entry WHERE codex_id = %(codex)s",
    # Written by no application ("unknown", as a migration backfills; see notebook.writers).
    "INSERT INTO notebook_entryrevision (codex_id, entry_id, revision, title, content, tags, related_agent_ids, "
    "provenance, recorded_at, writer_kind, writer_client_id, writer_name, writer_scopes) "
    "SELECT codex_id, id, 1, title, content, tags, related_agent_ids, NULL, created_at, 'unknown', '', '', '' "
    "FROM notebook_entry WHERE codex_id = %(codex)s",
    "INSERT INTO notebook_requestkey (codex_id, request_id, fingerprint, entry_id, created_at) "
    "SELECT %(codex)s, 'fill-' || i, md5(id::text) || md5(i::text), id, now() FROM bench_gen",
]
# Other people's entries: only the entry rows (their tag and agent rows never meet the large
# codex's searches), the rare word in every other one. %(codexes)s is an array of codex ids.
OTHERS_FILL = """
    INSERT INTO notebook_entry (id, codex_id, revision, title, content, content_bytes, tags,
        related_agent_ids, provenance, search_title, search_content, search_tags, search_tags_text,
        created_at, updated_at, write_seq)
    SELECT gen_random_uuid(), (%(codexes)s::bigint[])[1 + i %% cardinality(%(codexes)s::bigint[])], 1,
        NULL, content, octet_length(content), '["t1"]'::jsonb, '[]'::jsonb, NULL,
        '', lower(content), '["t1"]'::jsonb, 't1', now() - interval '1 day', now() - interval '1 day', i
    FROM (
        SELECT i, format('Other note %%s: %%s of the %%s unit, crew %%s.%%s', i,
            CASE WHEN i %% 3 = 0 THEN 'launch' ELSE 'survey' END,
            (ARRAY['north', 'south', 'east', 'west'])[1 + i %% 4], i %% 89,
            CASE WHEN i %% 2 = 0 THEN ' %(rare_word)s' ELSE '' END) AS content
        FROM generate_series(1, %(n)s) AS i
    ) AS generated
"""


# The trigram indexes a run can build: migration 0009's (the default), migration 0002's that
# it replaced, and the whole-table ones before those.
LAYOUTS = ("codex-keys", "per-codex-columns", "whole-table")


def trigram_index_statements(layout: str) -> tuple[list[str], list[str]]:
    """(drop, create) statements of the trigram indexes of ``layout`` (any other layout's dropped)."""
    columns = importlib.import_module("notebook.migrations.0002_search_trigram")
    keys = importlib.import_module("notebook.migrations.0009_codex_trigram_keys")
    drop = [f"DROP INDEX IF EXISTS {name}" for name in [*columns.PG_INDEXES, keys.INDEX]]
    if layout == "codex-keys":
        from django.db import connection

        pending_list = importlib.import_module("notebook.migrations.0010_trigram_keys_pending_list")
        create = [*keys.create_statements(keys.trgm_schema(connection), concurrently=False), pending_list.SET_LIMIT]
    elif layout == "per-codex-columns":
        create = columns.pg_create_statements()
    else:
        create = [
            f"CREATE INDEX {name} ON notebook_entry USING gin ({column} gin_trgm_ops)"
            for name, column in columns.PG_INDEXES.items()
        ]
    return drop, create


# The entry table rewritten in random order: where many people write at once, their entries
# lie mixed in the table, not each codex's in one stretch as the fill leaves them (a GIN scan
# that intersects a codex's posting list with a word's skips whole stretches of the other).
# The rows are the same; referencing rows are left alone (their triggers off meanwhile).
SHUFFLE = [
    "SET session_replication_role = replica",
    "CREATE TEMP TABLE bench_shuffled AS SELECT * FROM notebook_entry ORDER BY random()",
    "DELETE FROM notebook_entry",
    "VACUUM notebook_entry",
    "INSERT INTO notebook_entry SELECT * FROM bench_shuffled",
    "DROP TABLE bench_shuffled",
    "SET session_replication_role = DEFAULT",
]


def fill(codex, entries: int) -> None:
    from django.db import connection

    params = {
        "codex": codex.pk,
        "n": entries,
        "every": max(entries // PLANTED, 8),
        "rare_word": RARE_WORD,
        "rare_tag": RARE_TAG,
        "rare_agent": RARE_AGENT,
    }
    with connection.cursor() as cursor:
        for statement in FILL:
            # The rare word goes into a format() literal, so it is spliced in (a constant).
            cursor.execute(statement.replace("%(rare_word)s", RARE_WORD), params)


def fill_others(entries: int, codexes: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from notebook.models import Codex

    User = get_user_model()
    tag = uuid.uuid4().hex[:8]
    users = User.objects.bulk_create([User(username=f"other-{tag}-{n}") for n in range(codexes)])
    ids = [codex.pk for codex in Codex.objects.bulk_create([Codex(owner=user) for user in users])]
    with connection.cursor() as cursor:
        cursor.execute(OTHERS_FILL.replace("%(rare_word)s", RARE_WORD), {"codexes": ids, "n": entries})


def timed(work: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def calls_to_list_all(codex, **filters) -> tuple[int, int]:
    """Follow nextCursor to the end with limit 50; return (calls, entries listed)."""
    from notebook.selectors import entry_search
    from notebook.validation import parse_search_params

    calls = listed = 0
    cursor = None
    while True:
        page = entry_search(codex=codex, params=parse_search_params(limit=50, cursor=cursor, **filters))
        calls += 1
        listed += len(page.entries)
        if not page.has_more or calls >= 50_000:
            return calls, listed
        cursor = page.next_cursor


def explain(codex, **filters) -> str:
    """EXPLAIN ANALYZE of each candidate statement one search sends, as it sends it.

    Each SELECT on notebook_entry is explained right before it runs, on the same
    connection and in the same transaction, so planner settings the selector made
    for that statement apply.
    """
    from django.db import connection

    from notebook.selectors import entry_search
    from notebook.validation import parse_search_params

    plans = []

    def explaining(execute, sql, params, many, context):
        # The trigram step is one simple query of several statements, its values bound
        # (``notebook.sql.search._bitmap_only``: planner settings, the statement, the settings
        # put back): its statement is explained in the same query, so that the settings apply.
        parts = sql.split("; ") if params is None else [sql]
        reading = [i for i, part in enumerate(parts) if part.startswith("SELECT") and 'FROM "notebook_entry"' in part]
        if reading:
            first = reading[0]
            # With the costs: without them PostgreSQL leaves out its JIT summary too.
            parts[first] = "EXPLAIN (ANALYZE, BUFFERS) " + parts[first]
            cursor = context["cursor"]
            cursor.execute("; ".join(parts), params)
            for _ in range(first):
                cursor.nextset()
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explaining):
        entry_search(codex=codex, params=parse_search_params(limit=50, **filters))
    return "\n-- next statement --\n".join(plans)


def operations(codex, repeat: int) -> dict[str, Callable[[], object]]:
    """Each measured operation as a call of the service or selector function."""
    from notebook import services
    from notebook.models import Entry
    from notebook.selectors import entry_get, entry_search
    from notebook.validation import parse_entry_input, parse_search_params

    ids = list(Entry.objects.filter(codex=codex).order_by("?").values_list("id", flat=True)[:repeat])
    ids_iter = itertools.cycle(ids)

    def search(**kwargs):
        return lambda: entry_search(codex=codex, params=parse_search_params(**kwargs))

    def save():
        return services.entry_save(
            codex=codex,
            request_id=f"scale-{uuid.uuid4()}",
            data=parse_entry_input({"content": "a new note about the pump", "tags": ["t1", "fresh"]}),
        )

    target = save()

    def update():
        nonlocal target
        target = services.entry_update(
            codex=codex,
            entry_id=target.id,
            expected_revision=target.revision,
            data=parse_entry_input({"content": f"revised note {target.revision}", "tags": ["t2"]}),
        )

    return {
        "get": lambda: entry_get(codex=codex, entry_id=next(ids_iter)),
        "browse (limit 20)": search(limit=20),
        f"common tag {COMMON_TAG!r}": search(tag=COMMON_TAG, limit=20),
        f"rare tag {RARE_TAG!r}": search(tag=RARE_TAG, limit=50),
        f"related agent {RARE_AGENT!r}": search(related_agent_id=RARE_AGENT, limit=50),
        f"common query {COMMON_WORD!r}": search(query=COMMON_WORD, limit=20),
        f"rare query {RARE_WORD!r}": search(query=RARE_WORD, limit=50),
        "rare query + common tag": search(query=RARE_WORD, tag="t7", limit=50),
        "2-char query 'zq' (scan)": search(query="zq", limit=50),
        "save": save,
        "update": update,
    }


def statements(work: Callable[[], object]) -> int:
    """How many SQL statements (savepoints and commit included) one call sends."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        work()
    return len(captured)


def time_metrics_scrape(repeat: int, expected_entries: int) -> None:
    """``GET /metrics`` from a real server on this database, against ``GET /healthz`` (one
    ``SELECT 1``) from the same server in alternation: p50 and max of each, and the
    codex-totals query alone, in this process."""
    import httpx2

    from notebook import quotas
    from tests.served import free_port, start_serve, stop, wait_until_healthy

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "CODEX_PUBLIC_URL": base, "DJANGO_DEBUG": "0"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    server = start_serve(port, env, "--log-level", "warning")
    took: dict[str, list[float]] = {"/metrics": [], "/healthz": []}
    try:
        wait_until_healthy(base, server)
        with httpx2.Client(base_url=base, timeout=30) as http:
            for _ in range(3):  # warm: connections, statements
                http.get("/metrics")
            for _ in range(repeat):
                for path, times in took.items():
                    started = time.perf_counter()
                    answer = http.get(path)
                    times.append((time.perf_counter() - started) * 1000)
                    answer.raise_for_status()
                    if path == "/metrics":
                        scraped = answer
    finally:
        stop(server)
    entries = next(float(line.split()[1]) for line in scraped.text.splitlines() if line.startswith("codex_entries "))
    totals = timed(quotas.usage_totals, repeat)
    metrics, health = (statistics.median(took[path]) for path in ("/metrics", "/healthz"))
    print(
        f"GET /metrics over HTTP ({len(scraped.content):,} bytes, codex_entries {entries:,.0f} of "
        f"{expected_entries:,}): p50 {metrics:.2f} ms, max {max(took['/metrics']):.2f} ms; GET /healthz p50 "
        f"{health:.2f} ms, max {max(took['/healthz']):.2f} ms (scrape / health check {metrics / health:.2f}); "
        f"the codex-totals query alone p50 {statistics.median(totals):.2f} ms; {repeat} of each"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries in the large codex")
    parser.add_argument("--small", type=int, default=1_000, help="entries in the comparison codex")
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per operation")
    parser.add_argument(
        "--others", type=int, default=0, help="entries in other codexes, where the large codex's rare word is common"
    )
    parser.add_argument("--other-codexes", type=int, default=1_000, help="how many codexes hold --others")
    parser.add_argument("--trigram", choices=LAYOUTS, default=LAYOUTS[0], help="which trigram indexes to build")
    parser.add_argument(
        "--in-fill-order", action="store_true", help="leave each codex's entries together, as the fill makes them"
    )
    parser.add_argument("--no-explain", action="store_true")
    parser.add_argument("--metrics-only", action="store_true", help="after the fill, time only the /metrics scrape")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    os.environ.setdefault("SECRET_KEY", "bench-scale-" + "k" * 40)
    os.environ.setdefault("CODEX_LOG_LEVEL", "WARNING")
    # The filled codex is at the default quota of 1,000,000 entries; its saves must fit.
    os.environ.setdefault("CODEX_QUOTA_ENTRIES", str(10 * (args.entries + args.small)))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from notebook import services

    if connection.vendor != "postgresql":
        raise SystemExit("bench_scale.py needs PostgreSQL: run it under scripts/with_postgres.sh")

    call_command("migrate", verbosity=0)
    User = get_user_model()
    small = services.codex_for_user(user=User.objects.create_user(f"small-{uuid.uuid4().hex[:8]}"))
    large = services.codex_for_user(user=User.objects.create_user(f"large-{uuid.uuid4().hex[:8]}"))

    started = time.perf_counter()
    drop, create = trigram_index_statements(args.trigram)
    with connection.cursor() as cursor:
        # Building the trigram indexes once afterwards is much faster than growing them row by row.
        for statement in drop:
            cursor.execute(statement)
        fill(small, args.small)
        fill(large, args.entries)
        if args.others:
            fill_others(args.others, args.other_codexes)
        # Each codex's entry count, which the services keep and a search's walk window is
        # sized by (its stored bytes only matter to the quota, which nothing here nears), and
        # its write counter, which the next save continues from. One pass over the entries:
        # planned before any statistics exist, a subquery per codex was a sequential scan of
        # the whole table per codex (hours with --others 1000000). A codex with no entries
        # keeps its zeros.
        cursor.execute(
            "UPDATE notebook_codex c SET entry_count = totals.entries, last_write_seq = totals.last_seq"
            " FROM (SELECT codex_id, count(*) AS entries, max(write_seq) AS last_seq FROM notebook_entry"
            " GROUP BY codex_id) AS totals WHERE totals.codex_id = c.id"
        )
        small.refresh_from_db()
        large.refresh_from_db()
        if not args.in_fill_order:
            for statement in SHUFFLE:
                cursor.execute(statement)
        filled = time.perf_counter()
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for statement in create:
            cursor.execute(statement)
        indexed = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        size = cursor.fetchone()[0]
        cursor.execute(
            "SELECT pg_size_pretty(sum(pg_relation_size(indexrelid))) FROM pg_index "
            "WHERE indexrelid::regclass::text LIKE '%%_trgm' OR indexrelid::regclass::text LIKE '%%_trigram_keys'"
        )
        trigram_size = cursor.fetchone()[0]
    layout = args.trigram + ("" if args.in_fill_order else ", entries in random order")
    others = f" + {args.others:,} in {args.other_codexes:,} other codexes" if args.others else ""
    print(
        f"filled {args.entries:,} + {args.small:,}{others} entries in {filled - started:.0f} s, "
        f"{layout} trigram indexes ({trigram_size}) in {indexed - filled:.0f} s, "
        f"analyzed in {time.perf_counter() - indexed:.0f} s; database {size}"
    )
    if args.others:
        print(f"the rare word {RARE_WORD!r} is in 10 entries of each measured codex and in every other entry elsewhere")
    time_metrics_scrape(args.repeat, args.entries + args.small + args.others)
    if args.metrics_only:
        return

    results = {}
    for label, codex in [("small", small), ("large", large)]:
        results[label] = {name: timed(work, args.repeat) for name, work in operations(codex, args.repeat).items()}
    counts = {name: statements(work) for name, work in operations(large, 1).items()}
    print()
    print(
        f"{'operation (service/selector, no HTTP)':<36} {'small p50':>10} {'large p50':>10} {'large max':>10}  ms  SQL"
    )
    for name, samples in results["large"].items():
        small_p50 = statistics.median(results["small"][name])
        print(
            f"{name:<36} {small_p50:10.2f} {statistics.median(samples):10.2f} {max(samples):10.2f}  {counts[name]:5d}"
        )

    print()
    print(f"calls (limit 50) to list every match in the {args.entries:,}-entry codex:")
    for label, filters in [
        (f"rare word {RARE_WORD!r}", {"query": RARE_WORD}),
        (f"rare tag {RARE_TAG!r}", {"tag": RARE_TAG}),
        (f"rare agent {RARE_AGENT!r}", {"related_agent_id": RARE_AGENT}),
    ]:
        calls, listed = calls_to_list_all(large, **filters)
        print(f"  {label:<28} {calls:>6} call(s), {listed} entries")

    if not args.no_explain:
        for label, filters in [
            (f"rare query {RARE_WORD!r}", {"query": RARE_WORD}),
            (f"rare query {RARE_WORD!r} + common tag 't7'", {"query": RARE_WORD, "tag": "t7"}),
            (f"rare tag {RARE_TAG!r}", {"tag": RARE_TAG}),
            (f"common query {COMMON_WORD!r}", {"query": COMMON_WORD}),
            (f"common tag {COMMON_TAG!r}", {"tag": COMMON_TAG}),
        ]:
            print()
            print(f"EXPLAIN ANALYZE, candidates of {label}:")
            print(explain(large, **filters))


if __name__ == "__main__":
    main()
