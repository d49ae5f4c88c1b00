"""The 2025-03-26 era over real HTTP: what that version knows (no structured results, no output
schemas), its JSON-RPC batches, and, in every version, JSON-RPC mistakes answered in words a
client author can act on instead of the SDK's validation dump."""

import dataclasses
import json
from unittest import mock

from authserver.core.revocation import access_revoke
from mcp_endpoint.batches import MAX_BATCH_MESSAGES
from mcp_endpoint.tools import TOOLS, TOOLS_BY_NAME
from notebook.models import Entry
from tests.http_client import LEGACY, MODERN, OLDEST, post, rpc_body
from tests.live import LiveServerTestCase

SAVE, GET, SEARCH, UPDATE = "field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"
# What pydantic's validation report looks like; none of it may reach a client.
DUMP_MARKS = ("validation error", "pydantic", "input_value", "type=", "JSONRPCRequest", "union[")


def call_body(name: str, arguments: dict, request_id: int = 1) -> dict:
    return rpc_body("tools/call", {"name": name, "arguments": arguments}, request_id=request_id)


class EraTestCase(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.token = self.token_for(self.alice)

    def send(self, body: object, *, version: str | None, token: str | None = None):
        """POST ``body`` in ``version``, or (None) with no version header at all."""
        return post(self.mcp_url, body, token=token or self.token, version=version)

    def assert_clear_error(self, response, *, status: int = 400) -> str:
        self.assertEqual(response.status_code, status, response.text)
        error = response.json()["error"]
        self.assertEqual(error["code"], -32600, error)
        for mark in DUMP_MARKS:
            self.assertNotIn(mark.lower(), error["message"].lower())
        self.assertLess(len(error["message"]), 200)
        return error["message"]


class WhatTheEraKnowsTest(EraTestCase):
    def test_its_listing_has_no_output_schemas_and_titles_in_the_annotations(self) -> None:
        for version in (OLDEST, None):
            with self.subTest(version=version):
                tools = self.send(rpc_body("tools/list"), version=version).json()["result"]["tools"]
                self.assertEqual([tool["name"] for tool in tools], [tool.name for tool in TOOLS])
                for listed, tool in zip(tools, TOOLS, strict=True):
                    self.assertNotIn("outputSchema", listed)
                    self.assertNotIn("title", listed)
                    self.assertEqual(listed["annotations"], {"title": tool.title, **tool.annotations})
                    self.assertEqual(listed["inputSchema"], tool.input_schema)

    def test_later_versions_list_output_schemas_and_titles(self) -> None:
        for version in (LEGACY, "2025-11-25"):
            with self.subTest(version=version):
                tools = self.send(rpc_body("tools/list"), version=version).json()["result"]["tools"]
                for listed, tool in zip(tools, TOOLS, strict=True):
                    self.assertEqual(listed["outputSchema"], tool.output_schema)
                    self.assertEqual(listed["title"], tool.title)
                    self.assertEqual(listed["annotations"], tool.annotations)

    def test_its_results_are_the_json_text_alone(self) -> None:
        for version in (OLDEST, None):
            with self.subTest(version=version):
                request_id = f"era-{version}"
                saved = self.send(
                    call_body(SAVE, {"requestId": request_id, "entry": {"content": "c"}}), version=version
                )
                self.assertEqual(saved.status_code, 200, saved.text)
                result = saved.json()["result"]
                self.assertNotIn("structuredContent", result)
                self.assertFalse(result["isError"])
                self.assertEqual(len(result["content"]), 1)
                entry = json.loads(result["content"][0]["text"])["entry"]
                self.assertEqual(entry["content"], "c")
                got = self.send(call_body(GET, {"id": entry["id"]}), version=version).json()["result"]
                self.assertNotIn("structuredContent", got)
                self.assertEqual(json.loads(got["content"][0]["text"]), {"entry": entry})

    def test_later_versions_carry_structured_content(self) -> None:
        result = self.send(call_body(SEARCH, {}), version=LEGACY).json()["result"]
        self.assertEqual(result["structuredContent"], json.loads(result["content"][0]["text"]))

    def test_a_failure_has_the_same_form_in_every_era(self) -> None:
        missing = {"id": "11111111-1111-4111-8111-111111111111"}
        for version in (OLDEST, None, LEGACY):
            with self.subTest(version=version):
                result = self.send(call_body(GET, missing), version=version).json()["result"]
                self.assertTrue(result["isError"])
                self.assertNotIn("structuredContent", result)
                self.assertEqual(json.loads(result["content"][0]["text"])["error"]["code"], "not_found")


class BatchTest(EraTestCase):
    def test_a_batch_gets_the_answers_to_its_requests_in_one_array(self) -> None:
        batch = [
            rpc_body("tools/list", request_id=1),
            rpc_body("ping", request_id="two"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            call_body(SAVE, {"requestId": "b-1", "entry": {"content": "from a batch"}}, request_id=3),
            call_body(SEARCH, {"query": "from a batch"}, request_id=4),
        ]
        for version in (OLDEST, None):
            with self.subTest(version=version):
                response = self.send(batch, version=version)
                self.assertEqual(response.status_code, 200, response.text)
                self.assertEqual(response.headers["content-type"], "application/json")
                answers = {answer["id"]: answer for answer in response.json()}
                self.assertEqual(set(answers), {1, "two", 3, 4})
                self.assertEqual(len(answers[1]["result"]["tools"]), len(TOOLS))
                self.assertEqual(answers["two"]["result"], {})
                saved = json.loads(answers[3]["result"]["content"][0]["text"])["entry"]
                found = json.loads(answers[4]["result"]["content"][0]["text"])["entries"]
                self.assertEqual([entry["id"] for entry in found], [saved["id"]])
        # The second batch replayed the save's request id: one entry.
        self.assertEqual(Entry.objects.count(), 1)

    def test_notifications_alone_get_202_and_no_body(self) -> None:
        batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 2
        response = self.send(batch, version=OLDEST)
        self.assertEqual(response.status_code, 202, response.text)
        self.assertEqual(response.content, b"")

    def test_a_message_that_is_not_json_rpc_gets_its_own_error_in_the_array(self) -> None:
        batch = [5, {"jsonrpc": "2.0", "id": 7, "method": 5}, rpc_body("ping", request_id=8)]
        answers = self.send(batch, version=OLDEST).json()
        self.assertEqual(len(answers), 3)
        errors = [answer for answer in answers if "error" in answer]
        self.assertEqual([error["id"] for error in errors], [None, 7])
        self.assertEqual({error["error"]["code"] for error in errors}, {-32600})
        self.assertIn("JSON object", errors[0]["error"]["message"])
        self.assertIn('"method" must be a string', errors[1]["error"]["message"])
        self.assertEqual([answer["result"] for answer in answers if "result" in answer], [{}])

    def test_initialize_must_come_on_its_own(self) -> None:
        initialize = rpc_body(
            "initialize",
            {"protocolVersion": OLDEST, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            request_id=1,
        )
        answers = self.send([initialize, rpc_body("ping", request_id=2)], version=None).json()
        first = next(answer for answer in answers if answer["id"] == 1)
        self.assertEqual(first["error"]["code"], -32600)
        self.assertIn("initialize must be sent on its own", first["error"]["message"])

    def test_an_empty_or_oversized_batch_is_refused_in_words(self) -> None:
        self.assertIn("empty", self.assert_clear_error(self.send([], version=OLDEST)))
        too_many = [rpc_body("ping", request_id=i) for i in range(MAX_BATCH_MESSAGES + 1)]
        self.assertIn(f"at most {MAX_BATCH_MESSAGES}", self.assert_clear_error(self.send(too_many, version=OLDEST)))
        just_enough = self.send(too_many[:-1], version=OLDEST)
        self.assertEqual(len(just_enough.json()), MAX_BATCH_MESSAGES)

    def test_later_versions_refuse_a_batch_saying_what_to_do(self) -> None:
        for version in (LEGACY, "2025-11-25", MODERN):
            with self.subTest(version=version):
                message = self.assert_clear_error(self.send([rpc_body("ping")], version=version))
                self.assertIn("send each message in a POST of its own", message)
                self.assertIn(version, message)

    def test_a_batch_needs_a_token_with_every_scope_its_calls_need(self) -> None:
        reader = self.token_for(self.alice, scopes=("notes:read",))
        batch = [call_body(SEARCH, {}, request_id=1), call_body(SAVE, {"requestId": "r", "entry": {"content": "c"}})]
        response = self.send(batch, version=OLDEST, token=reader)
        self.assertEqual(response.status_code, 403, response.text)
        self.assertIn('error="insufficient_scope"', response.headers["www-authenticate"])
        self.assertEqual(self.send(batch, version=OLDEST, token="no-such-token").status_code, 401)
        self.assertEqual(Entry.objects.count(), 0)

    def test_each_call_of_a_batch_checks_its_token_afresh(self) -> None:
        # The batch's first call passes its check and runs; its service then revokes the token,
        # and each later call's own check refuses it (a notebook error: the request's first
        # check had passed), before its service runs.
        search = TOOLS_BY_NAME[SEARCH]

        def search_then_revoke(*args):
            try:
                return search.adapter(*args)
            finally:
                access_revoke(user=self.alice, by="operator")

        revoking = {SEARCH: dataclasses.replace(search, adapter=search_then_revoke)}
        batch = [
            call_body(SEARCH, {}, request_id=1),
            call_body(SAVE, {"requestId": "r", "entry": {"content": "c"}}, request_id=2),
            call_body(SEARCH, {}, request_id=3),
        ]
        with mock.patch.dict(TOOLS_BY_NAME, revoking):
            response = self.send(batch, version=OLDEST)
        self.assertEqual(response.status_code, 200, response.text)
        first, *later = response.json()
        self.assertFalse(first["result"]["isError"], first)
        for answer in later:
            self.assertTrue(answer["result"]["isError"])
            self.assertEqual(json.loads(answer["result"]["content"][0]["text"])["error"]["code"], "unauthenticated")
        self.assertEqual(Entry.objects.count(), 0)


class EnvelopeTest(EraTestCase):
    BAD_MESSAGES = [
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, '"method" must be a string'),
        ({"id": 1, "method": "tools/list"}, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, '"params" must be an object'),
        ({"jsonrpc": "2.0", "id": 1}, 'needs a "method"'),
        ({"jsonrpc": "2.0", "id": 1.5, "result": {}}, '"id" must be the string or integer'),
        ({"jsonrpc": "2.0", "id": 1, "result": 5}, '"result" must be an object'),
        ({"jsonrpc": "2.0", "id": 1, "error": "x"}, '"error" must be an object'),
        (5, "must be a JSON object"),
        ("tools/list", "must be a JSON object"),
    ]

    def test_every_version_answers_a_bad_envelope_in_words(self) -> None:
        for version in (OLDEST, None, LEGACY, "2025-11-25"):
            for message, words in self.BAD_MESSAGES:
                with self.subTest(version=version, message=message):
                    self.assertIn(words, self.assert_clear_error(self.send(message, version=version)))

    def test_a_bad_envelope_still_needs_a_good_token(self) -> None:
        response = self.send({"jsonrpc": "2.0", "id": 1, "method": 5}, version=LEGACY, token="no-such-token")
        self.assertEqual(response.status_code, 401)

    def test_a_tool_call_sent_as_a_notification_is_not_answered_without_a_token_check(self) -> None:
        notification = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": SAVE, "arguments": {"requestId": "n", "entry": {"content": "c"}}},
        }
        with_a_boolean_id = {**notification, "id": True}
        for message in (notification, with_a_boolean_id):
            with self.subTest(message=message):
                self.assertEqual(self.send(message, version=LEGACY, token="no-such-token").status_code, 401)
                self.assertEqual(self.send(message, version=LEGACY).status_code, 202)
        self.assertEqual(Entry.objects.count(), 0)  # a notification asks for nothing to be done
