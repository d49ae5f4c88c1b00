import copy
import dataclasses
import json

from django.test import SimpleTestCase
from jsonschema import Draft7Validator
from mcp.shared.inbound import x_mcp_header_map

from mcp_endpoint.arguments import _VALIDATORS, check_call, count_members
from mcp_endpoint.auth import ALL_SCOPES
from mcp_endpoint.listing import TOOLS_JSON_PATH, live_listing, render
from mcp_endpoint.server import header_annotated, tool_input_schema
from mcp_endpoint.tools import TOOLS, UNKNOWN_TOOL_SCOPES, scopes_for
from notebook import limits


class ToolListingTest(SimpleTestCase):
    def test_docs_mcp_tools_json_equals_the_live_listing(self) -> None:
        self.assertEqual(
            TOOLS_JSON_PATH.read_text(),
            render(live_listing()),
            "docs/mcp-tools.json is stale: run `python manage.py export_mcp_tools`",
        )

    def test_the_live_listing_serves_the_schemas_module_verbatim(self) -> None:
        listing = live_listing()
        server = {key: listing["server"][key] for key in ["name", "title", "version"]}
        self.assertEqual(server, {"name": "agent-codex", "title": "Agent Codex", "version": "0.1.0"})
        # The rest of serverInfo as the documented example instance shows it (mcp_endpoint.identity).
        self.assertEqual(listing["server"]["websiteUrl"], "https://codex.example.org/")
        self.assertEqual(
            [tool["name"] for tool in listing["tools"]],
            ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"],
        )
        for served, tool in zip(listing["tools"], TOOLS, strict=True):
            for key, written in tool.listing().items():
                self.assertEqual(served[key], written, f"{tool.name}.{key}")

    def test_each_schema_is_a_valid_standalone_root(self) -> None:
        for tool in TOOLS:
            for schema in [tool.input_schema, tool.output_schema]:
                Draft7Validator.check_schema(schema)
                text = json.dumps(schema)
                for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
                    self.assertTrue(ref.startswith("#/definitions/"), ref)
                    self.assertIn(ref.removeprefix("#/definitions/"), schema.get("definitions", {}))

    def test_fixed_members_forbid_additional_properties(self) -> None:
        def walk(node):
            if isinstance(node, dict):
                if node.get("type") == "object" and "properties" in node:
                    yield node
                for value in node.values():
                    yield from walk(value)

        for tool in TOOLS:
            for schema in [tool.input_schema, tool.output_schema]:
                for node in walk(schema):
                    self.assertIs(node.get("additionalProperties"), False, tool.name)

    def test_annotations_match_the_contract(self) -> None:
        annotations = {tool.name: tool.annotations for tool in TOOLS}
        self.assertEqual(
            annotations["field_notes_save"], {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
        )
        self.assertEqual(annotations["field_notes_get"], {"readOnlyHint": True, "idempotentHint": True})
        self.assertEqual(annotations["field_notes_search"], {"readOnlyHint": True, "idempotentHint": True})
        self.assertEqual(
            annotations["field_notes_update"], {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
        )

    def test_scopes_match_the_contract_and_the_description_says_them(self) -> None:
        scopes = {tool.name: sorted(tool.scopes) for tool in TOOLS}
        both = ["notes:read", "notes:write"]
        self.assertEqual(
            scopes,
            {
                "field_notes_save": both,
                "field_notes_get": ["notes:read"],
                "field_notes_search": ["notes:read"],
                "field_notes_update": both,
            },
        )
        for tool in TOOLS:
            needed = " and ".join(scope for scope in ALL_SCOPES if scope in tool.scopes)
            self.assertTrue(tool.description.endswith(f" Needs {needed}."), tool.description)
            self.assertNotIn("Needs", tool.summary)

    def test_every_face_of_a_tool_comes_from_its_one_record(self) -> None:
        names = [tool.name for tool in TOOLS]
        self.assertEqual(list(_VALIDATORS), names)
        self.assertEqual([tool["name"] for tool in live_listing()["tools"]], names)
        self.assertEqual([tool["name"] for tool in json.loads(TOOLS_JSON_PATH.read_text())["tools"]], names)
        for tool in TOOLS:
            self.assertIs(_VALIDATORS[tool.name].schema, tool.input_schema)
            self.assertEqual(scopes_for(tool.name), tool.scopes)

    def test_an_unknown_tool_needs_the_read_scope_and_is_an_invalid_params_error(self) -> None:
        self.assertEqual(scopes_for("field_notes_delete"), UNKNOWN_TOOL_SCOPES)
        self.assertEqual(UNKNOWN_TOOL_SCOPES, frozenset({"notes:read"}))
        with self.assertRaisesMessage(Exception, "Unknown tool: 'field_notes_delete'") as raised:
            check_call("field_notes_delete", {})
        self.assertEqual(raised.exception.error.code, -32602)

    def test_descriptions_are_built_from_the_limits(self) -> None:
        text = json.dumps([tool.listing() for tool in TOOLS])
        for phrase in [
            f"1 to {limits.thousands(limits.CONTENT_MAX_BYTES)} bytes as UTF-8",
            f"at most {limits.thousands(limits.PROVENANCE_MAX_BYTES)} bytes as compact UTF-8 JSON",
            f"examines at most {limits.CANDIDATES_PER_PAGE} notes",
            f"(1 to {limits.SEARCH_LIMIT_MAX}, default {limits.SEARCH_LIMIT_DEFAULT})",
        ]:
            self.assertIn(phrase, text)
        self.assertEqual(limits.thousands(65_536), "65,536")

    def test_count_members_counts_elements_and_members_recursively(self) -> None:
        self.assertEqual(count_members({}), 0)
        self.assertEqual(count_members({"a": [1, 2, {"b": []}]}), 1 + 3 + 1)
        self.assertGreater(count_members({"a": list(range(5000))}), 2000)


class McpParamHeaderSchemaTest(SimpleTestCase):
    """The SDK checks Mcp-Param-* headers against a tool's ``x-mcp-header`` annotations;
    it is given a schema only where there are some (None means nothing to check)."""

    def test_a_schema_without_annotations_gives_the_sdk_nothing_to_check(self) -> None:
        for tool in TOOLS:
            self.assertEqual(x_mcp_header_map(tool.input_schema), {}, tool.name)
            self.assertIsNone(tool_input_schema(tool.name), tool.name)
        self.assertIsNone(tool_input_schema("field_notes_delete"))

    def test_an_annotated_schema_is_given_to_the_sdk(self) -> None:
        get = next(tool for tool in TOOLS if tool.name == "field_notes_get")
        annotated = copy.deepcopy(get.input_schema)
        annotated["properties"]["id"]["x-mcp-header"] = "Entry-Id"
        tool = dataclasses.replace(get, input_schema=annotated)
        tools = [tool if other.name == tool.name else other for other in TOOLS]
        self.assertEqual(header_annotated(tools), {"field_notes_get": annotated})
