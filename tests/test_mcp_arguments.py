"""The two-tier argument check: the compiled validator never lets through what jsonschema
refuses, and ``schema_violation`` answers exactly as jsonschema alone did."""

import copy
from typing import Any

from django.test import SimpleTestCase
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from mcp_endpoint.arguments import _COMPILED, _VALIDATORS, schema_violation
from mcp_endpoint.listing import TOOLS_JSON_PATH, live_listing, render
from mcp_endpoint.tools import TOOLS

EXAMPLES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=8,
)
# Strings that sit on the edges of the schemas' rules: ids with a trailing newline, one
# character too many or too few, astral characters counted once, control characters.
EDGE_STRINGS = st.sampled_from(
    [
        "",
        "\n",
        "3f1c2a8e-4b5d-4e6f-8a9b-0c1d2e3f4a5b",
        "3f1c2a8e-4b5d-4e6f-8a9b-0c1d2e3f4a5b\n",
        "3F1C2A8E-4B5D-4E6F-8A9B-0C1D2E3F4A5B",
        "3f1c2a8e-4b5d-4e6f-8a9b-0c1d2e3f4a5",
        "😀" * 64,
        "😀" * 65,
        "x" * 200,
        "x" * 201,
        "a\x00b",
    ]
)


def _compiled_accepts(name: str, arguments: Any) -> bool:
    try:
        _COMPILED[name](arguments)
    except Exception:  # JsonSchemaException, or anything else: not accepted
        return False
    return True


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every position in a JSON tree (the root included)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _mutated(data: st.DataObject, valid: Any) -> Any:
    """A valid argument object with one position replaced, one member dropped or one added."""
    path = data.draw(st.sampled_from(_paths(valid)))
    action = data.draw(st.sampled_from(["replace", "edge", "drop", "add"]))
    if action == "replace":
        return _replace(valid, path, data.draw(JSON_VALUES))
    if action == "edge":
        return _replace(valid, path, data.draw(EDGE_STRINGS | st.integers(-2, 2**53 + 1) | st.just(1.0)))
    parent_path = path[:-1] if path else ()
    parent = valid
    for step in parent_path:
        parent = parent[step]
    if action == "drop" and path and isinstance(parent, dict):
        return _replace(valid, parent_path, {key: item for key, item in parent.items() if key != path[-1]})
    if isinstance(parent, dict):
        key = data.draw(st.text(max_size=12) | st.sampled_from(sorted(parent)) if parent else st.text(max_size=12))
        return _replace(valid, parent_path, {**parent, key: data.draw(JSON_VALUES | EDGE_STRINGS)})
    return _replace(valid, path, data.draw(JSON_VALUES))


def _agree(test: SimpleTestCase, name: str, arguments: Any) -> None:
    jsonschema_valid = _VALIDATORS[name].is_valid(arguments)
    if _compiled_accepts(name, arguments):
        test.assertTrue(jsonschema_valid, f"compiled validator accepted what jsonschema refuses: {arguments!r}")
    if not isinstance(arguments, dict):
        return
    violation = schema_violation(name, arguments)
    if violation is not None:
        test.assertFalse(jsonschema_valid, f"refused arguments jsonschema accepts: {arguments!r}: {violation}")
        test.assertTrue(violation.startswith(f"Invalid arguments for {name}: arguments"), violation)
    else:
        test.assertTrue(jsonschema_valid, f"accepted arguments jsonschema refuses: {arguments!r}")


class CompiledValidatorTest(SimpleTestCase):
    def test_one_compiled_validator_per_tool(self) -> None:
        self.assertEqual(list(_COMPILED), [tool.name for tool in TOOLS])


def _tool_tests(tool_name: str, schema: dict) -> None:
    # hypothesis-jsonschema, like fastjsonschema, rewrites the schema it is given.
    schema = copy.deepcopy(schema)

    @EXAMPLES
    @given(arguments=from_schema(schema))
    def test_valid_arguments_pass_both(self: SimpleTestCase, arguments: Any) -> None:
        self.assertTrue(_VALIDATORS[tool_name].is_valid(arguments))
        self.assertTrue(_compiled_accepts(tool_name, arguments), f"compiled validator refused {arguments!r}")
        self.assertIsNone(schema_violation(tool_name, arguments))

    @EXAMPLES
    @given(data=st.data(), valid=from_schema(schema))
    def test_mutated_arguments_agree(self: SimpleTestCase, data: st.DataObject, valid: Any) -> None:
        _agree(self, tool_name, _mutated(data, valid))

    suffix = tool_name.removeprefix("field_notes_")
    setattr(CompiledValidatorTest, f"test_{suffix}_valid_arguments_pass_both", test_valid_arguments_pass_both)
    setattr(CompiledValidatorTest, f"test_{suffix}_mutated_arguments_agree", test_mutated_arguments_agree)


for _tool in TOOLS:
    _tool_tests(_tool.name, _tool.input_schema)


class SchemaUntouchedTest(SimpleTestCase):
    def test_compiling_leaves_the_served_schemas_as_written(self) -> None:
        # hypothesis-jsonschema rewrites the schemas it is given ($refs inlined, ``false``
        # as ``{"not": {}}``); these tests give it copies, and tools/list serves the originals.
        self.assertEqual(TOOLS_JSON_PATH.read_text(), render(live_listing()))
        save = next(tool for tool in TOOLS if tool.name == "field_notes_save")
        self.assertEqual(save.input_schema["properties"]["entry"], {"$ref": "#/definitions/EntryInput"})
        self.assertIs(save.input_schema["definitions"]["EntryInput"]["additionalProperties"], False)
