"""Tool results: the one place a notebook failure is formatted (contract 6)."""

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from django.db import InterfaceError, OperationalError

import codex_metrics
from common.outage import log_database_unavailable
from mcp_endpoint import versions
from mcp_endpoint.auth import TokenRefused
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.calls import ToolCall
from notebook.exceptions import Internal, NotebookError, Unavailable

logger = logging.getLogger(__name__)


def json_text(payload: dict[str, Any]) -> str:
    """Compact JSON, non-ASCII as is: with orjson, faster than the json module,
    which is kept for what orjson refuses (integers past 64 bits, lone surrogates). Both
    write the same text, except that orjson spells exponents without "+" (1e16, not 1e+16)."""
    try:
        return orjson.dumps(payload).decode()
    except orjson.JSONEncodeError:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def text_result(payload: dict[str, Any], *, is_error: bool, version: str = versions.LATEST) -> dict[str, Any]:
    """The result in ``version``: ``payload`` as JSON text and, unless an error or in a version
    without structured results (2025-03-26), as structured content. It is the wire form the
    SDK serves: its members named and ordered as the version's result schema has them, with
    ``resultType`` where the version has one (``mcp_types.methods.serialize_server_result``
    gives this very dict back; ``tests/test_mcp_results.py``)."""
    result: dict[str, Any] = {"content": [{"text": json_text(payload), "type": "text"}], "isError": is_error}
    if versions.modern(version):
        result["resultType"] = "complete"
    if not is_error and versions.structured(version):
        result["structuredContent"] = payload
    return result


# What a tool call can answer: ok, or one of the contract's error codes (the metrics' labels).
OUTCOMES = ("ok", *dict.fromkeys(kind.code for kind in (NotebookError, *NotebookError.__subclasses__())))


def error_result(error: NotebookError, version: str = versions.LATEST) -> dict[str, Any]:
    """The only place notebook failures are formatted (contract 6)."""
    return text_result({"error": {"code": error.code, "message": error.message}}, is_error=True, version=version)


async def run_tool(
    name: str,
    work: Callable[[], dict[str, Any]],
    call: ToolCall | None = None,
    *,
    version: str = versions.LATEST,
    refusal_answers_request: bool = False,
) -> dict[str, Any]:
    """Run a tool's sync work through the boundary; every failure becomes a tool result in
    ``version``, but for a refused token whose refusal answers the request
    (``refusal_answers_request``: the guard left the request's check to this call), which is
    counted and logged as the call's outcome and then raised for the guard to answer with
    401, 403 or 503. ``call``, when given, logs the call's line with its outcome and duration."""
    started = time.perf_counter()
    try:
        done = await run_sync(work)
    except TokenRefused as refused:
        if refusal_answers_request:
            _record(name, refused.code, started, call)
            raise
        outcome, result = refused.code, error_result(refused, version)
    except NotebookError as error:
        outcome, result = error.code, error_result(error, version)
    except (OperationalError, InterfaceError) as error:
        log_database_unavailable(logger, name, error)
        outcome = Unavailable.code
        result = error_result(Unavailable("The notebook is temporarily unavailable; retry shortly"), version)
    except Exception:  # the tool boundary: nothing escapes to the client
        reference = uuid.uuid4().hex[:12]
        logger.error("tool %s failed (reference %s)", name, reference, exc_info=True)
        outcome = Internal.code
        result = error_result(Internal(f"Something went wrong on the server (reference {reference})"), version)
    else:
        outcome, result = "ok", text_result(done, is_error=False, version=version)
    _record(name, outcome, started, call)
    return result


def _record(name: str, outcome: str, started: float, call: ToolCall | None) -> None:
    codex_metrics.tool_call(name, outcome, started)
    if call is not None:
        call.log(outcome, time.perf_counter() - started)
