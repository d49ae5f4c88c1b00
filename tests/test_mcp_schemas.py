import json

from django.test import SimpleTestCase
from jsonschema import Draft7Validator

from mcp_endpoint.arguments import count_members
from mcp_endpoint.listing import TOOLS_JSON_PATH, live_listing, render
from mcp_endpoint.schemas import TOOLS


class ToolListingTest(SimpleTestCase):
    def test_docs_mcp_tools_json_equals_the_live_listing(self) -> None:
        self.assertEqual(
            TOOLS_JSON_PATH.read_text(),
            render(live_listing()),
            "docs/mcp-tools.json is stale: run `python manage.py export_mcp_tools`",
        )

    def test_the_live_listing_serves_the_schemas_module_verbatim(self) -> None:
        listing = live_listing()
        self.assertEqual(listing["server"], {"name": "agent-codex", "title": "Agent Codex", "version": "0.1.0"})
        self.assertEqual(
            [tool["name"] for tool in listing["tools"]],
            ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"],
        )
        for served, written in zip(listing["tools"], TOOLS, strict=True):
            for key in ["name", "title", "description", "inputSchema", "outputSchema", "annotations"]:
                self.assertEqual(served[key], written[key], f"{written['name']}.{key}")

    def test_each_schema_is_a_valid_standalone_root(self) -> None:
        for tool in TOOLS:
            for key in ["inputSchema", "outputSchema"]:
                schema = tool[key]
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
            for key in ["inputSchema", "outputSchema"]:
                for node in walk(tool[key]):
                    self.assertIs(node.get("additionalProperties"), False, f"{tool['name']}.{key}")

    def test_annotations_match_the_contract(self) -> None:
        annotations = {tool["name"]: tool["annotations"] for tool in TOOLS}
        self.assertEqual(
            annotations["field_notes_save"], {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
        )
        self.assertEqual(annotations["field_notes_get"], {"readOnlyHint": True, "idempotentHint": True})
        self.assertEqual(annotations["field_notes_search"], {"readOnlyHint": True, "idempotentHint": True})
        self.assertEqual(
            annotations["field_notes_update"], {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
        )

    def test_count_members_counts_elements_and_members_recursively(self) -> None:
        self.assertEqual(count_members({}), 0)
        self.assertEqual(count_members({"a": [1, 2, {"b": []}]}), 1 + 3 + 1)
        self.assertGreater(count_members({"a": list(range(5000))}), 2000)
