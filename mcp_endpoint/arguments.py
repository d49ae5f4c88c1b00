"""Checks of ``tools/call`` arguments. An unknown tool and an argument tree of more than
2,000 members are protocol errors (JSON-RPC -32602, ``check_call``). Arguments that break the
tool's JSON Schema are not: ``schema_violation`` names the failing path, and the tool answers
``invalid_argument`` as a tool result in every protocol era (contract 6; SEP-1303: the model
reads the result and can correct its call, which it cannot do with a protocol error).

Every call is checked by a validator ``fastjsonschema`` compiled to Python code from the
tool's schema, about twenty times cheaper per call than walking the schema; only a call it
refuses goes to ``jsonschema``, which decides and names the failing path. The compiled
check is never more lenient than ``jsonschema`` (tested on generated arguments): where they
differ it is stricter (its ``$`` is ECMA-262's, the end of the string), and then
``jsonschema``'s verdict stands, as it did before.
"""

from collections.abc import Callable
from typing import Any

import fastjsonschema
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError as SchemaViolation
from jsonschema.exceptions import best_match
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

import codex_metrics
from mcp_endpoint.tools import TOOLS, TOOLS_BY_NAME
from notebook.limits import MAX_ARGUMENT_MEMBERS

_VALIDATORS = {tool.name: Draft7Validator(tool.input_schema) for tool in TOOLS}
# The fast first check of each tool's arguments: returns, or raises JsonSchemaException.
_COMPILED: dict[str, Callable[[Any], Any]] = {
    tool.name: fastjsonschema.compile(tool.input_schema, use_default=False) for tool in TOOLS
}


def count_members(value: Any, limit: int = MAX_ARGUMENT_MEMBERS) -> int:
    """Cumulative array elements plus object members in a JSON tree; stops once past ``limit``."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        node = stack.pop()
        if isinstance(node, dict):
            total += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            total += len(node)
            stack.extend(node)
    return total


def _path(error: SchemaViolation) -> str:
    path = "arguments"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def describe_violation(error: SchemaViolation) -> str:
    """A short message naming the failing path, without echoing (possibly huge) values."""
    rule, limit = error.validator, error.validator_value
    messages = {
        "type": f"must be of type {limit}",
        "maxLength": f"must be at most {limit} characters",
        "minLength": "must not be empty" if limit == 1 else f"must be at least {limit} characters",
        "maxItems": f"must have at most {limit} items",
        "minimum": f"must be at least {limit}",
        "maximum": f"must be at most {limit}",
        "pattern": f"must match {limit}",
    }
    if rule in messages:
        return f"{_path(error)} {messages[rule]}"
    if rule == "required":
        missing = [name for name in limit if isinstance(error.instance, dict) and name not in error.instance]
        return f"{_path(error)} is missing required member {missing[0]!r}" if missing else error.message[:200]
    if rule == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(str(key) for key in error.instance if key not in allowed)
        return f"{_path(error)} has unexpected member {extra[0][:64]!r}" if extra else error.message[:200]
    return f"{_path(error)}: {error.message[:200]}"


@codex_metrics.counts_protocol_errors
def check_call(name: str, arguments: dict[str, Any]) -> None:
    """The protocol-level checks: unknown tool, argument-tree size."""
    if name not in TOOLS_BY_NAME:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name[:100]!r}")
    if count_members(arguments) > MAX_ARGUMENT_MEMBERS:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"arguments have more than {MAX_ARGUMENT_MEMBERS} array elements and object members in all",
        )


def schema_violation(name: str, arguments: dict[str, Any]) -> str | None:
    """What breaks the JSON Schema of the known tool ``name``, naming the path; None if nothing."""
    try:
        _COMPILED[name](arguments)
        return None
    except fastjsonschema.JsonSchemaException:
        pass  # jsonschema decides, and names the failing path
    error = best_match(_VALIDATORS[name].iter_errors(arguments))
    return None if error is None else f"Invalid arguments for {name}: {describe_violation(error)}"
