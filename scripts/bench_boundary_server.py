"""``scripts/bench_boundary.py``'s servers: the bare SDK anchor's one tool, reading one row by key.

``BENCH_BOUNDARY`` chooses how the tool reaches PostgreSQL (``DATABASE_URL``):

- ``none``: it does not (the no-op anchor);
- ``thread``: the project's sync boundary, ``run_in_executor`` with the caller's context
  (``mcp_endpoint.boundary``), to a psycopg connection and cursor kept per worker thread;
- ``async``: psycopg's ``AsyncConnection`` on the event loop, eight of them taken from and
  given back to an ``asyncio.Queue``;
- ``pool``: psycopg_pool's ``AsyncConnectionPool`` of eight;
- ``answer``: no database, but the answer of a search by tag: twenty entries' summaries, as
  structured content and as its JSON text, in wire form as the project hands it to the SDK;
- ``answer-thread``: that answer after the ``thread`` mode's hop and read.

Each is the anchor's own server (``bench_noop_server.sdk_app``, its one ``noop`` tool), so the
same wrk script drives them. Every mode that reads runs the same prepared statement in
autocommit, as the project's get does.

    BENCH_BOUNDARY=thread uvicorn --app-dir scripts bench_boundary_server:app --port 8001
"""

import asyncio
import contextvars
import json
import os
import random
import threading
from typing import Any

import mcp_types as types
import psycopg
from bench_noop_server import sdk_app
from psycopg_pool import AsyncConnectionPool

MODE = os.environ.get("BENCH_BOUNDARY", "none")
URL = os.environ.get("DATABASE_URL", "")
ROWS = 1000
CONNECTIONS = 8
TABLE = "bench_boundary_rows"
SELECT = f"SELECT id, body FROM {TABLE} WHERE id = %s"

_local = threading.local()


def _search_answer(entries: int = 20) -> dict[str, Any]:
    """A search by tag's result with ``entries`` summaries, shaped as the project's."""
    summaries = [
        {
            "id": f"00000000-0000-4000-8000-{n:012d}",
            "revision": 1,
            "tags": ["t3"],
            "relatedAgentIds": [],
            "createdAt": "2026-12-02T13:50:56.717Z",
            "updatedAt": "2026-12-02T13:50:56.717Z",
            "excerpt": f"Seeded note {n} about the launch checklist.",
            "contentBytes": 42,
        }
        for n in range(entries)
    ]
    coverage = {"storage": "active-only", "mode": "literal-substring-v1", "scanned": entries, "hasMore": False}
    structured = {"entries": summaries, "coverage": coverage}
    text = json.dumps(structured, separators=(",", ":"), ensure_ascii=False)
    return {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "resultType": "complete",
        "structuredContent": structured,
    }


_ANSWER = _search_answer()


def _read_in_thread(key: int) -> Any:
    cursor = getattr(_local, "cursor", None)
    if cursor is None:
        cursor = _local.cursor = psycopg.Cursor(psycopg.connect(URL, autocommit=True))
    cursor.execute(SELECT, (key,))
    return cursor.fetchone()


class _Queued:
    """Async connections, each used by one call at a time."""

    def __init__(self) -> None:
        self.free: asyncio.Queue[psycopg.AsyncCursor[Any]] = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(CONNECTIONS):
            connection = await psycopg.AsyncConnection.connect(URL, autocommit=True)
            self.free.put_nowait(psycopg.AsyncCursor(connection))

    async def read(self, key: int) -> Any:
        cursor = await self.free.get()
        try:
            await cursor.execute(SELECT, (key,))
            return await cursor.fetchone()
        finally:
            self.free.put_nowait(cursor)


_queued = _Queued()
_pool = (
    AsyncConnectionPool(URL, min_size=CONNECTIONS, max_size=CONNECTIONS, kwargs={"autocommit": True}, open=False)
    if MODE == "pool"
    else None
)


async def _hop(key: int) -> Any:
    """The read in a worker thread, as ``mcp_endpoint.boundary.run_sync`` hops."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(None, context.run, _read_in_thread, key)


async def _read(key: int) -> Any:
    if MODE == "thread":
        return await _hop(key)
    if MODE == "async":
        return await _queued.read(key)
    if MODE == "pool":
        async with _pool.connection() as connection:
            cursor = await connection.execute(SELECT, (key,))
            return await cursor.fetchone()
    return (key, "")


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | dict[str, Any]:
    if MODE == "answer":
        return _ANSWER
    if MODE == "answer-thread":
        await _hop(random.randrange(ROWS))
        return _ANSWER
    row = await _read(random.randrange(ROWS))
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(row[0]))], structured_content={})


async def ready() -> None:
    if MODE == "async":
        await _queued.open()
    if MODE == "pool":
        await _pool.open(wait=True)


app = sdk_app("bench-boundary", call_tool, ready=ready)
