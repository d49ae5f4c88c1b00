"""Operator backups of the whole database (``manage.py codex_backup`` / ``codex_restore``).

Everything is in the copy: accounts, OAuth clients and tokens (stored hashed), codexes,
entries with every revision, request keys, and on SQLite the FTS5 trigram index with its
triggers. The per-person export (``codex_export``) is not a backup: it carries one codex.

SQLite: ``sqlite3.Connection.backup`` in one step, that is one read transaction. In WAL
mode a reader never blocks the writer, so the server keeps committing while the pages are
copied, and the copy is the database as of the moment that read began: every write
acknowledged before it is in the copy (an acknowledged write is committed and synced,
``notebook.transactions``). The copy is written beside its destination, switched to a
rollback journal (one self-contained file, no ``-wal`` beside it), checked with
``PRAGMA integrity_check`` and only then renamed into place, so a file at PATH is always a
whole, checked backup. A restore copies it back with the same API into the configured
path (creating it, or, with ``force``, replacing what is there) and turns WAL back on.

PostgreSQL: ``pg_dump --format=custom`` (a consistent snapshot taken at its start, also
without blocking writers), by a ``pg_dump`` whose major version is at least the server's:
an older one refuses, or worse, misses what it does not know. ``pg_restore`` loads it in
one transaction into the configured database, which must be empty unless ``clean``.
"""

import os
import re
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

# Tables a database of this project always has: what tells a codex database from another file.
MARKER_TABLE = "django_migrations"
SQLITE_BUSY_TIMEOUT_MS = 20_000


class BackupError(Exception):
    """A backup or restore refused or failed; the message says what to do."""


@dataclass(frozen=True)
class Outcome:
    path: Path
    bytes: int
    detail: str


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    return connection


def sqlite_problems(connection: sqlite3.Connection) -> list[str]:
    """What ``PRAGMA integrity_check`` finds (empty when the file is sound), and whether it
    is a codex database at all."""
    try:
        problems = [row[0] for row in connection.execute("PRAGMA integrity_check") if row[0] != "ok"]
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:  # "file is not a database", and the like
        return [str(error)]
    if MARKER_TABLE not in tables:
        problems.append(f"no {MARKER_TABLE} table: not an Agent Codex database")
    return problems


def sqlite_backup(source: Path, target: Path) -> Outcome:
    """A consistent copy of the live SQLite database ``source`` at ``target``."""
    if not source.is_file():
        raise BackupError(f"there is no database at {source}")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    origin = _connect(source)
    copy = _connect(partial)
    try:
        started = time.monotonic()
        # pages=-1: every page in one step, so one read transaction, so one snapshot.
        origin.backup(copy, pages=-1)
        copied = time.monotonic()
        copy.execute("PRAGMA journal_mode=DELETE")
        if problems := sqlite_problems(copy):
            raise BackupError(f"the copy failed its integrity check: {'; '.join(problems[:5])}")
    except BaseException:
        copy.close()
        partial.unlink(missing_ok=True)
        raise
    finally:
        origin.close()
    copy.close()
    _fsync(partial)
    os.replace(partial, target)
    _fsync(target.parent)
    checked = time.monotonic()
    detail = f"copied in {copied - started:.1f} s, integrity_check ok in {checked - copied:.1f} s"
    return Outcome(target, target.stat().st_size, detail)


def sqlite_restore(backup: Path, target: Path, *, force: bool) -> Outcome:
    """Copy the backup ``backup`` into the database file ``target``."""
    if not backup.is_file():
        raise BackupError(f"there is no backup at {backup}")
    source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    try:
        if problems := sqlite_problems(source):
            raise BackupError(f"{backup} is not a sound backup: {'; '.join(problems[:5])}")
        if target.exists() and not force:
            with closing(_connect(target)) as existing:
                tables = existing.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            if tables:
                raise BackupError(
                    f"{target} already holds a database; stop the server, then pass --force to replace it"
                )
        target.parent.mkdir(parents=True, exist_ok=True)
        destination = _connect(target)
        try:
            source.backup(destination, pages=-1)
            destination.execute("PRAGMA journal_mode=WAL")
            if problems := sqlite_problems(destination):
                raise BackupError(f"the restored database failed its integrity check: {'; '.join(problems[:5])}")
        finally:
            destination.close()
    finally:
        source.close()
    return Outcome(target, target.stat().st_size, "restored, integrity_check ok")


# ------------------------------------------------------------------------ PostgreSQL ---


def _major(version_text: str) -> int:
    """The major version in ``pg_dump (PostgreSQL) 17.2 (Debian 17.2-1)``."""
    found = re.search(r"\)\s*(\d+)", version_text) or re.search(r"(\d+)", version_text)
    if found is None:
        raise BackupError(f"cannot read a version in {version_text!r}")
    return int(found.group(1))


def pg_tool(name: str, server_major: int) -> str:
    """``pg_dump`` or ``pg_restore`` of at least the server's major version: Debian's
    /usr/lib/postgresql/<major>/bin first (postgresql-client-<major>), then PATH."""
    candidates = [f"/usr/lib/postgresql/{server_major}/bin/{name}"]
    if found := shutil.which(name):
        candidates.append(found)
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=True).stdout
            tool_major = _major(version)
            if tool_major >= server_major:
                return candidate
            raise BackupError(
                f"{candidate} is version {tool_major}, older than the server ({server_major}); "
                f"install postgresql-client-{server_major} or newer"
            )
    raise BackupError(f"no {name} found; install postgresql-client-{server_major}")


# Django's and psycopg's own keys in a PostgreSQL database's OPTIONS; every other one is a libpq keyword.
_DJANGO_OPTIONS = {
    "isolation_level",
    "assume_role",
    "server_side_binding",
    "pool",
    "cursor_factory",
    "context",
    "prepare_threshold",
}


def pg_conninfo(settings_dict: dict[str, Any]) -> str:
    """The configured database as a libpq connection string for ``--dbname``: its host list
    (a replicated cluster's nodes), ``target_session_attrs``, ``sslmode``, ``connect_timeout``
    and the rest of OPTIONS, as the server itself connects. The password is not in it."""
    params: dict[str, Any] = {"dbname": settings_dict["NAME"]}
    for keyword, key in (("host", "HOST"), ("port", "PORT"), ("user", "USER")):
        if settings_dict.get(key):
            params[keyword] = settings_dict[key]
    for keyword, value in settings_dict.get("OPTIONS", {}).items():
        if keyword not in _DJANGO_OPTIONS and isinstance(value, str | int):
            params[keyword] = value
    return make_conninfo(**params)


def pg_environment(settings_dict: dict[str, Any]) -> dict[str, str]:
    """The password in libpq's variable, never on a command line."""
    environ = dict(os.environ)
    if settings_dict.get("PASSWORD"):
        environ["PGPASSWORD"] = str(settings_dict["PASSWORD"])
    return environ


def _run(command: list[str], environ: dict[str, str]) -> None:
    done = subprocess.run(command, env=environ, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(command[0]).name} failed: {done.stderr.strip()[-2000:]}")


def pg_backup(settings_dict: dict[str, Any], server_major: int, target: Path) -> Outcome:
    """``pg_dump -Fc`` of the configured database at ``target`` (written beside it, then renamed)."""
    pg_dump = pg_tool("pg_dump", server_major)
    environ = pg_environment(settings_dict)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        _run(
            [
                pg_dump,
                "--format=custom",
                "--no-password",
                f"--file={partial}",
                f"--dbname={pg_conninfo(settings_dict)}",
            ],
            environ,
        )
        # The archive's table of contents reads back: the file is whole.
        _run([pg_tool("pg_restore", server_major), "--list", str(partial)], environ)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _fsync(partial)
    os.replace(partial, target)
    _fsync(target.parent)
    return Outcome(target, target.stat().st_size, f"pg_dump -Fc by {pg_dump}")


def pg_restore(settings_dict: dict[str, Any], server_major: int, backup: Path, *, tables: int, clean: bool) -> Outcome:
    """``pg_restore`` of ``backup`` into the configured database, in one transaction."""
    if not backup.is_file():
        raise BackupError(f"there is no backup at {backup}")
    if tables and not clean:
        raise BackupError(
            f"the database {settings_dict['NAME']} is not empty ({tables} tables); restore into an empty "
            "database, or stop the server and pass --clean to drop what the backup holds first"
        )
    command = [pg_tool("pg_restore", server_major), "--no-password", "--exit-on-error", "--single-transaction"]
    # Owners and grants of the source cluster need not exist here: the restoring role owns it all.
    command += ["--no-owner", "--no-privileges", f"--dbname={pg_conninfo(settings_dict)}"]
    if clean:
        command += ["--clean", "--if-exists"]
    _run([*command, str(backup)], pg_environment(settings_dict))
    return Outcome(backup, backup.stat().st_size, "pg_restore in one transaction")
