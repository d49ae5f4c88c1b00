"""Django's PostgreSQL backend with a health check that costs no round trip while the
connection is quiet (``ENGINE = "codex_site.postgresql"``; ``codex_site.database_url`` sets it).

Django checks a persistent connection (``CONN_HEALTH_CHECKS``) before its first statement of
each call by sending ``SELECT 1``: one more round trip on every tool call. Between calls the
connection is idle, and an idle PostgreSQL connection receives nothing unless something ended
it or is about to: the server's ``FATAL`` before it closes the session (shutdown, a switchover,
``pg_terminate_backend``, ``idle_session_timeout``) or the end of the stream when the backend is
gone (a killed postmaster's backends exit). So the socket is polled first, without waiting:
nothing to read means the check passes; anything to read (or a connection libpq no longer
holds as idle and healthy) means Django's own check, which then fails, closes the connection
and lets the next statement open one (on a multi-host ``DATABASE_URL``, to the new primary).

What neither check sees in advance is a host that vanished without closing anything: Django's
``SELECT 1`` would wait for TCP to give up and then reconnect, this lets the call's statement
wait and fail, and the next call reconnects (``tcp_user_timeout``, docs/deploy.md).

Each session also runs without parallel query (``SESSION_SETTINGS``), set when Django configures
a new connection (its own or its pool's), as it sets the session's time zone.
"""

import select

from django.db.backends.postgresql import base
from psycopg import pq

# Every statement this application sends reads a bounded stretch of one codex, and a parallel
# worker's start (a process forked for the statement) costs more than the work it would share:
# on the 2-core machine, 13 ms where the statement's own work was 2 ms (a rare word with a common
# tag in a codex of 1,000,000 entries, whose sample the planner judged worth a second worker,
# docs/performance.md). Off for the session, once per connection, in no statement's round trip.
SESSION_SETTINGS = "SET max_parallel_workers_per_gather = 0"


class DatabaseWrapper(base.DatabaseWrapper):
    def _configure_connection(self, connection) -> bool:
        super()._configure_connection(connection)
        with connection.cursor() as cursor:
            cursor.execute(SESSION_SETTINGS)
        return True  # a connection outside autocommit commits the setting (as Django's time zone)

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and not self.pool
            and quiet(self.connection)
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()


def quiet(connection) -> bool:
    """Whether an idle psycopg connection is healthy as far as libpq and its socket can tell
    without a round trip: open, not in a transaction, and nothing sent to it since."""
    if connection.closed or connection.pgconn.status != pq.ConnStatus.OK:
        return False
    if connection.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    poller = select.poll()
    poller.register(connection.pgconn.socket, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)
