"""What a write to the security cache costs as the table grows (figures, no pass/fail).

A flood of strangers from many networks leaves rows in the ``default`` cache (a few per network:
docs/architecture.md, "Security state"). This fills its table (``codex_cache``, in a fresh
database: a temporary SQLite file, or the one ``DATABASE_URL`` names) with live rows, and at each
size times ``--writes`` new entries written through Django's ``DatabaseCache`` (which counts the
table before every write; given a ``MAX_ENTRIES`` above every size, so that it culls nothing and
every size stays what it says) and through ``common.durable_cache.DurableDatabaseCache`` (one
statement a write, as configured), on the same table. It prints the median and the 90th
percentile of each, in milliseconds.

    .venv/bin/python scripts/bench_security_cache.py
    .venv/bin/python scripts/bench_security_cache.py --sizes 1000,10000,100000 --writes 100
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_security_cache.py
"""

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 5_000


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000,300000", help="live rows in the table, comma-separated")
    parser.add_argument("--writes", type=int, default=50, help="writes timed at each size and for each cache")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    var = Path(tempfile.mkdtemp(prefix="codex-bench-cache-"))
    os.environ.update(DJANGO_DEBUG="0", SECRET_KEY="bench-" + "k" * 50, CODEX_VAR_DIR=str(var))
    os.environ.setdefault("CODEX_SQLITE_PATH", str(var / "codex.sqlite3"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.cache.backends.db import DatabaseCache
    from django.core.management import call_command
    from django.db import connection

    from common.durable_cache import DurableDatabaseCache

    call_command("migrate", verbosity=0)
    params = {"OPTIONS": settings.CACHES["default"]["OPTIONS"]}
    caches = {
        "Django's DatabaseCache": ("django", DatabaseCache("codex_cache", {"OPTIONS": {"MAX_ENTRIES": 10**12}})),
        "DurableDatabaseCache": ("durable", DurableDatabaseCache("codex_cache", params)),
    }
    database = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    print(f"database: {database}; MAX_ENTRIES {params['OPTIONS']['MAX_ENTRIES']:,}; {args.writes} writes each")
    print(f"{'live rows':>10}  {'cache':<24}{'median ms':>10}{'p90 ms':>10}")
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM codex_cache")
    held = 0
    for size in sizes:
        with connection.cursor() as cursor:
            for first in range(held, size, BATCH):
                rows = [(f"flood:{n}", "gAJLAS4=", expires) for n in range(first, min(size, first + BATCH))]
                cursor.executemany("INSERT INTO codex_cache (cache_key, value, expires) VALUES (%s, %s, %s)", rows)
            if connection.vendor == "postgresql":
                cursor.execute("ANALYZE codex_cache")  # as autovacuum would have by then
        held = size
        for name, (label, cache) in caches.items():
            timings = []
            for write in range(args.writes):
                started = time.perf_counter()
                cache.set(f"probe:{size}:{label}:{write}", write, 600)
                timings.append((time.perf_counter() - started) * 1000)
            with connection.cursor() as cursor:  # the probes go, so each size holds what it says
                cursor.execute("DELETE FROM codex_cache WHERE cache_key LIKE %s", ["%probe:%"])
            print(f"{size:>10,}  {name:<24}{percentile(timings, 0.5):>10.2f}{percentile(timings, 0.9):>10.2f}")


if __name__ == "__main__":
    main()
