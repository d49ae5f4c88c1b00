"""Backup and restore of a 100,000-entry database under a write load (figures, no pass/fail).

Fills a fresh database (a temporary SQLite file, or the one ``DATABASE_URL`` names) with
``--entries`` entries through the save service, then runs ``--writers`` threads that save
entries without pause and records each save's latency, in two phases of the same run:

- anchor: ``--seconds`` of the write load alone;
- backup: the same load while ``manage.py codex_backup`` (a process of its own, as an
  operator runs it) copies the database.

It prints the backup's time (as the command reports it: copy and check, without Python's
start-up) and size, the writes' calls/s, p50, p99 and worst case in both phases, and their
ratio; then the time ``codex_restore`` takes to load the backup into a fresh database.

    .venv/bin/python scripts/bench_backup.py                      # SQLite, 100,000 entries
    .venv/bin/python scripts/bench_backup.py --entries 20000 --seconds 5
    bash scripts/with_postgres.sh .venv/bin/python scripts/bench_backup.py
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 2_000


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def fill(codex, entries: int) -> float:
    """``entries`` saves, ``BATCH`` per transaction (each save's own work, one commit per batch)."""
    from notebook import services
    from notebook.transactions import write_transaction
    from notebook.validation import parse_entry_input

    started = time.perf_counter()
    for first in range(0, entries, BATCH):
        with write_transaction():
            for n in range(first, min(entries, first + BATCH)):
                data = parse_entry_input(
                    {
                        "title": f"Field note {n}",
                        "content": f"Observation {n}: " + "the river rose two hand-widths overnight; " * 6,
                        "tags": [f"site-{n % 50}", "survey"],
                        "relatedAgentIds": [f"agent-{n % 7}"],
                    }
                )
                services.entry_save(codex=codex, request_id=f"fill-{n}", data=data)
        print(f"\r  filled {min(entries, first + BATCH):,} / {entries:,}", end="", flush=True)
    print()
    return time.perf_counter() - started


class Load:
    """Writer threads saving without pause; each save's latency in seconds."""

    def __init__(self, codex, writers: int, tag: str) -> None:
        self.codex = codex
        self.tag = tag
        self.stop = threading.Event()
        self.latencies: list[list[float]] = [[] for _ in range(writers)]
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(writers)]

    def _write(self, writer: int) -> None:
        from django.db import connection

        from notebook import services
        from notebook.validation import parse_entry_input

        n = 0
        while not self.stop.is_set():
            data = parse_entry_input({"content": f"load {self.tag} {writer} {n}", "tags": ["load"]})
            started = time.perf_counter()
            services.entry_save(codex=self.codex, request_id=f"load-{self.tag}-{writer}-{n}", data=data)
            self.latencies[writer].append(time.perf_counter() - started)
            n += 1
        connection.close()

    def __enter__(self) -> "Load":
        self.started = time.perf_counter()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()
        self.seconds = time.perf_counter() - self.started

    def figures(self) -> dict[str, float]:
        samples = [latency for writer in self.latencies for latency in writer]
        return {
            "rate": len(samples) / self.seconds,
            "p50": statistics.median(samples) * 1000,
            "p99": percentile(samples, 0.99) * 1000,
            "max": max(samples) * 1000,
            "count": len(samples),
        }


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def reported_seconds(output: str) -> float:
    return float(re.search(r" in ([0-9.]+) s ", output).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000, help="entries in the database (default 100,000)")
    parser.add_argument("--writers", type=int, default=2, help="threads saving during each phase (default 2)")
    parser.add_argument("--seconds", type=float, default=10, help="length of the anchor phase (default 10)")
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="codex-bench-backup-"))
    env = dict(os.environ, DJANGO_DEBUG="0", SECRET_KEY="bench-" + "k" * 50, CODEX_VAR_DIR=str(var))
    env.setdefault("CODEX_SQLITE_PATH", str(var / "codex.sqlite3"))
    env["CODEX_QUOTA_ENTRIES"] = str(10 * args.entries)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from notebook import services

    try:
        call_command("migrate", verbosity=0)
        database = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
        user = get_user_model().objects.create_user(f"bench-{os.getpid()}")
        codex = services.codex_for_user(user=user)
        print(f"database: {database}; filling {args.entries:,} entries; {args.writers} writer threads")
        fill_seconds = fill(codex, args.entries)
        print(f"  in {fill_seconds:.0f} s")
        connection.close()

        with Load(codex, args.writers, "anchor") as anchor:
            time.sleep(args.seconds)
        backup = var / "codex.backup"
        with Load(codex, args.writers, "backup") as during:
            time.sleep(1)  # the load is under way before the backup starts
            output = manage("codex_backup", str(backup), env=env)
        backup_seconds = reported_seconds(output)

        if database == "SQLite":
            restore_env = dict(env, CODEX_SQLITE_PATH=str(var / "restored.sqlite3"))
        else:
            restored_name = f"{connection.settings_dict['NAME']}_bench_restored"
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{restored_name}"')
                cursor.execute(f'CREATE DATABASE "{restored_name}"')
            restore_env = dict(env, DATABASE_URL=env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + restored_name)
        restore_seconds = reported_seconds(manage("codex_restore", str(backup), env=restore_env))
        if database == "PostgreSQL":
            connection.close()
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{restored_name}"')

        quiet, busy = anchor.figures(), during.figures()
        print()
        print(f"backup of {args.entries:,} entries: {backup_seconds:.2f} s, {backup.stat().st_size / 2**20:.1f} MiB")
        print(f"  codex_backup said: {output.strip()}")
        print(f"restore into a fresh database: {restore_seconds:.2f} s")
        print()
        print(f"{'write load':<24} {'saves':>7} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for label, figures in (("alone (anchor)", quiet), ("during the backup", busy)):
            print(
                f"{label:<24} {figures['count']:7.0f} {figures['rate']:9.1f} {figures['p50']:8.2f} "
                f"{figures['p99']:8.2f} {figures['max']:8.1f}"
            )
        print(
            f"{'during / alone':<24} {'':>7} {busy['rate'] / quiet['rate']:9.3f} {busy['p50'] / quiet['p50']:8.3f} "
            f"{busy['p99'] / quiet['p99']:8.3f}"
        )
        print(f"(the backup phase lasts {during.seconds:.1f} s, the command's Python start-up included)")
    finally:
        if connection.vendor == "postgresql":
            connection.close()
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
