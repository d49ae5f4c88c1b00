"""Tool results: the one place a notebook failure is formatted (contract 6)."""

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import mcp_types as types
import orjson
from django.db import InterfaceError, OperationalError
from pydantic import BaseModel

import codex_metrics
from common.outage import log_database_unavailable
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.calls import ToolCall
from notebook.exceptions import Internal, NotebookError, Unavailable

logger = logging.getLogger(__name__)


def _dumped(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


# A tool result in the wire form the SDK's own models dump to (member names, resultType):
# the handler returns the dict, which the SDK validates against the protocol version's
# result schema as it does a model, but without first dumping a model (one walk over the
# payload fewer per call; a search page's payload is twenty summaries).
_RESULT = _dumped(types.CallToolResult(content=[], is_error=False))
_TEXT = _dumped(types.TextContent(type="text", text=""))
_STRUCTURED = types.CallToolResult.model_fields["structured_content"].alias


def json_text(payload: dict[str, Any]) -> str:
    """Compact JSON, non-ASCII as is: with orjson, faster than the json module,
    which is kept for what orjson refuses (integers past 64 bits, lone surrogates). Both
    write the same text, except that orjson spells exponents without "+" (1e16, not 1e+16)."""
    try:
        return orjson.dumps(payload).decode()
    except orjson.JSONEncodeError:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def text_result(payload: dict[str, Any], *, is_error: bool, structured: bool = True) -> dict[str, Any]:
    """The result: ``payload`` as JSON text, and, unless an error or for a protocol version
    without structured results (``structured`` false: 2025-03-26), as structured content."""
    text = json_text(payload)
    result = {**_RESULT, "content": [{**_TEXT, "text": text}], "isError": is_error}
    if structured and not is_error:
        result[_STRUCTURED] = payload
    return result


# What a tool call can answer: ok, or one of the contract's error codes (the metrics' labels).
OUTCOMES = ("ok", *dict.fromkeys(kind.code for kind in (NotebookError, *NotebookError.__subclasses__())))


def error_result(error: NotebookError) -> dict[str, Any]:
    """The only place notebook failures are formatted (contract 6)."""
    return text_result({"error": {"code": error.code, "message": error.message}}, is_error=True)


async def run_tool(
    name: str,
    work: Callable[[], dict[str, Any]],
    call: ToolCall | None = None,
    *,
    structured: bool = True,
) -> dict[str, Any]:
    """Run a tool's sync work through the boundary; every failure becomes a tool result.
    ``call``, when given, logs the call's line with its outcome and duration; ``structured``
    false leaves out the structured content (a protocol version without it)."""
    started = time.perf_counter()
    try:
        done = await run_sync(work)
    except NotebookError as error:
        outcome, result = error.code, error_result(error)
    except (OperationalError, InterfaceError) as error:
        log_database_unavailable(logger, name, error)
        outcome = Unavailable.code
        result = error_result(Unavailable("The notebook is temporarily unavailable; retry shortly"))
    except Exception:  # the tool boundary: nothing escapes to the client
        reference = uuid.uuid4().hex[:12]
        logger.error("tool %s failed (reference %s)", name, reference, exc_info=True)
        outcome = Internal.code
        result = error_result(Internal(f"Something went wrong on the server (reference {reference})"))
    else:
        outcome, result = "ok", text_result(done, is_error=False, structured=structured)
    codex_metrics.tool_call(name, outcome, started)
    if call is not None:
        call.log(outcome, time.perf_counter() - started)
    return result
