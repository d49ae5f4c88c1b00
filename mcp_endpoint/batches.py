"""JSON-RPC batches: served in 2025-03-26, refused with words to act on in every other version.

2025-03-26 lets a client POST a JSON array of messages (2025-06-18 removed it); the SDK takes one
message per POST, and answered a batch with pydantic's validation report. Here:

- ``batch_refusal`` answers a batch the request's version does not take (every version but
  2025-03-26: send each message in its own POST), an empty one and one past
  ``MAX_BATCH_MESSAGES``;
- ``batch_answer`` answers a 2025-03-26 batch, whose token the guard has checked, as that
  version's Streamable HTTP transport asks: each message is answered as if posted alone (by
  the SDK's kernel or its transport: the guard says which, ``ServeAlone``), so each tool call
  checks its token afresh and runs exactly as a single one does; the answers to its requests
  come back in one JSON array, and a batch of notifications and responses alone gets 202 with
  no body. ``initialize`` must come on its own (2025-03-26's lifecycle), and a message that is
  not JSON-RPC gets its own error in the array, as JSON-RPC 2.0 answers a batch.
"""

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from mcp_endpoint import versions
from mcp_endpoint.envelopes import envelope_problem, error_body, error_response, request_id

# Each message of a batch is a request to the SDK of its own; the body's 1 MiB bounds the
# bytes, and this bounds the work one POST can ask for.
MAX_BATCH_MESSAGES = 64

ASGIHandler = Callable[[Scope, Receive, Send], Awaitable[None]]
# (the batch's scope, its receive, one message) -> the status and body of that message's answer.
ServeAlone = Callable[[Scope, Receive, Any], Awaitable[tuple[int, bytes]]]


def batch_refusal(headers: Mapping[str, str], messages: list[Any]) -> Response | None:
    """The answer to a batch this request cannot make, or None when it is to be served."""
    if not versions.batches_allowed(headers):
        version = versions.requested_version(headers)
        return error_response(
            None,
            f"JSON-RPC batches are part of protocol version 2025-03-26 only; in {version[:40]} send each "
            "message in a POST of its own",
        )
    if not messages:
        return error_response(None, "An empty JSON-RPC batch holds no message to answer")
    if len(messages) > MAX_BATCH_MESSAGES:
        return error_response(
            None, f"A JSON-RPC batch may hold at most {MAX_BATCH_MESSAGES} messages; this one holds {len(messages)}"
        )
    return None


async def through_the_transport(handle: ASGIHandler, scope: Scope, receive: Receive, message: Any) -> tuple[int, bytes]:
    """The SDK transport's answer to ``message`` posted on its own: the status and the body."""
    body = json.dumps(message).encode()
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # the request's own body was read whole: this waits for its end

    status = 500
    chunks: list[bytes] = []

    async def capture(sent: Message) -> None:
        nonlocal status
        if sent["type"] == "http.response.start":
            status = sent["status"]
        elif sent["type"] == "http.response.body":
            chunks.append(sent.get("body", b""))

    await handle(dict(scope), replay, capture)
    return status, b"".join(chunks)


def batch_answer(alone: ServeAlone, messages: list[Any]) -> ASGIHandler:
    """The answer to a batch that ``batch_refusal`` let through, as an ASGI app: each message
    is served by ``alone`` as if it were posted alone."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        await serve_batch(alone, scope, receive, send, messages)

    return answer


async def serve_batch(alone: ServeAlone, scope: Scope, receive: Receive, send: Send, messages: list[Any]) -> None:
    """Answer a batch, one message at a time."""
    answers: list[bytes] = []
    for message in messages:
        if problem := envelope_problem(message):
            answers.append(error_body(request_id(message), problem))
            continue
        if message.get("method") == "initialize":
            answers.append(error_body(request_id(message), "initialize must be sent on its own, not in a batch"))
            continue
        status, body = await alone(scope, receive, message)
        if status not in (200, 202):
            # Not about this message but about the POST (its headers): the whole batch's answer.
            await Response(body, status_code=status, media_type="application/json")(scope, receive, send)
            return
        if body:
            answers.append(body)
    if not answers:
        await Response(status_code=202)(scope, receive, send)
        return
    await Response(b"[" + b",".join(answers) + b"]", media_type="application/json")(scope, receive, send)
