"""Tool results: the one place a notebook failure is formatted (contract 6)."""

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import mcp_types as types
from django.db import InterfaceError, OperationalError

from codex_site.outage import log_database_unavailable
from mcp_endpoint.boundary import run_sync
from notebook.exceptions import Internal, NotebookError, Unavailable

logger = logging.getLogger(__name__)


def text_result(payload: dict[str, Any], *, is_error: bool) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=None if is_error else payload,
        is_error=is_error,
    )


def error_result(error: NotebookError) -> types.CallToolResult:
    """The only place notebook failures are formatted (contract 6)."""
    return text_result({"error": {"code": error.code, "message": error.message}}, is_error=True)


async def run_tool(name: str, work: Callable[[], dict[str, Any]]) -> types.CallToolResult:
    """Run a tool's sync work through the boundary; every failure becomes a tool result."""
    try:
        result = await run_sync(work)
    except NotebookError as error:
        return error_result(error)
    except (OperationalError, InterfaceError) as error:
        log_database_unavailable(logger, name, error)
        return error_result(Unavailable("The notebook is temporarily unavailable; retry shortly"))
    except Exception:  # the tool boundary: nothing escapes to the client
        reference = uuid.uuid4().hex[:12]
        logger.error("tool %s failed (reference %s)", name, reference, exc_info=True)
        return error_result(Internal(f"Something went wrong on the server (reference {reference})"))
    return text_result(result, is_error=False)
