"""One SQLite database file's shared state in this process: the write queue (a lock), the
write connection every write transaction of the process runs on, the group sync and the
checkpointer."""

import threading

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from notebook.sqlite.checkpointer import Checkpointer
from notebook.sqlite.group_sync import LogSync


class SQLiteFile:
    """What this process's writers of one SQLite database file share: the write queue, the
    write connection, the group sync and the checkpointer."""

    def __init__(self, name: str, connection: BaseDatabaseWrapper) -> None:
        self.lock = threading.Lock()
        self.sync = LogSync(name)
        # Same backend and settings as the threads' connections; opened on first use.
        self.connection = type(connection)(connection.settings_dict, connection.alias)
        self.connection.inc_thread_sharing()
        self.checkpointer = Checkpointer(connection.alias, self.lock)


_files: dict[str, SQLiteFile] = {}
_files_guard = threading.Lock()


def file_of(connection: BaseDatabaseWrapper) -> SQLiteFile:
    name = str(connection.settings_dict["NAME"])
    found = _files.get(name)
    if found is None:
        with _files_guard:
            found = _files.get(name)
            if found is None:
                found = _files[name] = SQLiteFile(name, connection)
    return found


def write_queue(using: str = DEFAULT_DB_ALIAS) -> threading.Lock:
    """The queue of this process's writers of the SQLite database ``using`` names."""
    return file_of(connections[using]).lock
