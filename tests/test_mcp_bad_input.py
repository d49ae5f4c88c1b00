"""No input, however malformed, yields a 500, a traceback or a half-written entry (contract 6)."""

import json

from notebook.models import Entry, EntryRevision, RequestKey
from tests.base import nested
from tests.hostile import raw_request
from tests.http_client import LEGACY, MODERN, OLDEST, call_tool, post
from tests.live import LiveServerTestCase

ENTRY_ID = "11111111-1111-4111-8111-111111111111"
PROTOCOL = "protocol"  # JSON-RPC -32602: an unknown tool, or more than 2,000 members
SCHEMA = "invalid_argument"  # a tool result naming the path (SEP-1303), in every protocol era
SAVE, GET, SEARCH, UPDATE = "field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"


def save_args(**entry) -> dict:
    return {"requestId": "bad-1", "entry": {"content": "c", **entry}}


# (label, tool, arguments, expected): expected is PROTOCOL or a notebook error code.
CASES = [
    ("save without entry", SAVE, {"requestId": "x"}, SCHEMA),
    ("save without requestId", SAVE, {"entry": {"content": "c"}}, SCHEMA),
    ("save with an extra argument", SAVE, {**save_args(), "owner": "bob"}, SCHEMA),
    ("entry with an extra member", SAVE, save_args(userId="bob"), SCHEMA),
    ("entry is a string", SAVE, {"requestId": "x", "entry": "c"}, SCHEMA),
    ("requestId is a number", SAVE, {"requestId": 7, "entry": {"content": "c"}}, SCHEMA),
    ("requestId is empty", SAVE, {"requestId": "", "entry": {"content": "c"}}, SCHEMA),
    ("requestId is 129 characters", SAVE, {"requestId": "r" * 129, "entry": {"content": "c"}}, SCHEMA),
    ("requestId has U+0000", SAVE, {"requestId": "a\x00b", "entry": {"content": "c"}}, "invalid_argument"),
    ("content is missing", SAVE, {"requestId": "x", "entry": {"title": "t"}}, SCHEMA),
    ("content is empty", SAVE, save_args(content=""), SCHEMA),
    ("content is null", SAVE, save_args(content=None), SCHEMA),
    ("content has U+0000", SAVE, save_args(content="a\x00b"), "invalid_argument"),
    ("content is 65,537 bytes", SAVE, save_args(content="\u20ac" * 21_845 + "ab"), "invalid_argument"),
    ("title is null", SAVE, save_args(title=None), SCHEMA),
    ("title is a number", SAVE, save_args(title=5), SCHEMA),
    ("title has U+0000", SAVE, save_args(title="a\x00"), "invalid_argument"),
    ("title has a newline", SAVE, save_args(title="a\nb"), "invalid_argument"),
    ("tags is a string", SAVE, save_args(tags="a"), SCHEMA),
    ("tags has 33 items", SAVE, save_args(tags=[str(i) for i in range(33)]), SCHEMA),
    ("tags has a number", SAVE, save_args(tags=[1]), SCHEMA),
    ("tags has U+0000", SAVE, save_args(tags=["a\x00"]), "invalid_argument"),
    ("tags has duplicates", SAVE, save_args(tags=["a", "a"]), "invalid_argument"),
    ("relatedAgentIds has U+0000", SAVE, save_args(relatedAgentIds=["\x00"]), "invalid_argument"),
    ("provenance is an array", SAVE, save_args(provenance=[1]), SCHEMA),
    ("provenance is null", SAVE, save_args(provenance=None), SCHEMA),
    ("provenance value has U+0000", SAVE, save_args(provenance={"a": "\x00"}), "invalid_argument"),
    ("provenance key has U+0000", SAVE, save_args(provenance={"\x00": 1}), "invalid_argument"),
    ("provenance is 9 deep", SAVE, save_args(provenance=nested(9)), "invalid_argument"),
    ("provenance is 8,193 bytes", SAVE, save_args(provenance={"s": "x" * 8_185}), "invalid_argument"),
    # 2 + 2 + 1 + 1,996 = 2,001 members; the same with 1,995 is 2,000 and passes the tree rule.
    ("a 2,001-member tree", SAVE, save_args(provenance={"a": [0] * 1_996}), PROTOCOL),
    ("a 2,001-member search", SEARCH, {"query": "x", "extra": list(range(2_000))}, PROTOCOL),
    ("get without id", GET, {}, SCHEMA),
    ("get with an uppercase id", GET, {"id": "ABCDEF11-1111-4111-8111-111111111111"}, SCHEMA),
    ("get with a version-1 UUID", GET, {"id": "11111111-1111-1111-8111-111111111111"}, SCHEMA),
    ("get with garbage", GET, {"id": "../../etc/passwd"}, SCHEMA),
    ("get with U+0000", GET, {"id": ENTRY_ID[:-1] + "\x00"}, SCHEMA),
    ("get with an extra argument", GET, {"id": ENTRY_ID, "codex": "bob"}, SCHEMA),
    ("search limit 0", SEARCH, {"limit": 0}, SCHEMA),
    ("search limit 51", SEARCH, {"limit": 51}, SCHEMA),
    ("search limit as text", SEARCH, {"limit": "5"}, SCHEMA),
    ("search limit 2.5", SEARCH, {"limit": 2.5}, SCHEMA),
    ("search query of 257 characters", SEARCH, {"query": "q" * 257}, SCHEMA),
    ("search tag is empty", SEARCH, {"tag": ""}, SCHEMA),
    ("search cursor is garbage", SEARCH, {"cursor": "garbage"}, "invalid_argument"),
    ("search cursor has U+0000", SEARCH, {"cursor": "a\x00b"}, "invalid_argument"),
    ("search cursor of 2,049 characters", SEARCH, {"cursor": "c" * 2_049}, SCHEMA),
    ("update with revision 0", UPDATE, {"id": ENTRY_ID, "expectedRevision": 0, "entry": {"content": "c"}}, SCHEMA),
    (
        "update with revision 2^53",
        UPDATE,
        {"id": ENTRY_ID, "expectedRevision": 2**53, "entry": {"content": "c"}},
        SCHEMA,
    ),
    (
        "update with revision 1.5",
        UPDATE,
        {"id": ENTRY_ID, "expectedRevision": 1.5, "entry": {"content": "c"}},
        SCHEMA,
    ),
    (
        "update with revision true",
        UPDATE,
        {"id": ENTRY_ID, "expectedRevision": True, "entry": {"content": "c"}},
        SCHEMA,
    ),
    (
        "update of a missing entry",
        UPDATE,
        {"id": ENTRY_ID, "expectedRevision": 1, "entry": {"content": "c"}},
        "not_found",
    ),
    (
        "update with content U+0000",
        UPDATE,
        {"id": ENTRY_ID, "expectedRevision": 1, "entry": {"content": "\x00"}},
        "invalid_argument",
    ),
    ("an unknown tool", "field_notes_delete", {"id": ENTRY_ID}, PROTOCOL),
]


class BadInputTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))

    def assert_nothing_written(self) -> None:
        self.assertEqual((Entry.objects.count(), EntryRevision.objects.count(), RequestKey.objects.count()), (0, 0, 0))

    def test_each_bad_call_gets_the_contracts_answer(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            for label, tool, arguments, expected in CASES:
                with self.subTest(label, version=version):
                    response = call_tool(self.mcp_url, self.token, tool, arguments, version=version)
                    self.assertLess(response.status_code, 500, response.text)
                    reply = response.json()
                    if expected == PROTOCOL:
                        self.assertEqual(reply["error"]["code"], -32602, reply)
                        self.assertNotIn("Traceback", reply["error"]["message"])
                        self.assertLess(len(reply["error"]["message"]), 400)
                    else:
                        result = reply["result"]
                        self.assertTrue(result["isError"], result)
                        self.assertNotIn("structuredContent", result)
                        self.assertEqual(json.loads(result["content"][0]["text"])["error"]["code"], expected)
        self.assert_nothing_written()

    def test_schema_violations_are_tool_results_naming_the_failing_path_in_every_era(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            for arguments, named in [
                (save_args(tags=["ok", 5]), "arguments.entry.tags[1]"),
                (save_args(userId="x"), "'userId'"),
            ]:
                with self.subTest(named, version=version):
                    response = call_tool(self.mcp_url, self.token, SAVE, arguments, version=version)
                    self.assertEqual(response.status_code, 200, response.text)
                    result = response.json()["result"]
                    self.assertTrue(result["isError"])
                    error = json.loads(result["content"][0]["text"])["error"]
                    self.assertEqual(error["code"], "invalid_argument")
                    self.assertIn(named, error["message"])

    def test_the_tree_rule_counts_exactly_2000(self) -> None:
        response = call_tool(self.mcp_url, self.token, SAVE, save_args(provenance={"a": [0] * 1_995}))
        self.assertFalse(response.json()["result"]["isError"], response.text)
        self.assertEqual(Entry.objects.count(), 1)

    def test_malformed_bodies_never_yield_500(self) -> None:
        bodies = [
            b"{not json",
            b"",
            b"[]",
            b'"just a string"',
            b"42",
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"nope"}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"field_notes_get","arguments":[1]}}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"field_notes_save","arguments":{"requestId":"r","entry":{"content":"\\ud800"}}}}',
            b"\xff\xfe\x00garbage",
            b'{"jsonrpc":"2.0","id":1,"method":"no/such/method"}',
        ]
        for version in (OLDEST, LEGACY, MODERN):
            for body in bodies:
                with self.subTest(body=body[:40], version=version):
                    response = post(self.mcp_url, token=self.token, content=body, version=version)
                    self.assertLess(response.status_code, 500, response.text)
                    self.assertNotIn("Traceback", response.text)
        response = post(self.mcp_url, token=self.token, content=b"{}", headers={"Content-Type": "text/plain"})
        self.assertLess(response.status_code, 500)
        self.assert_nothing_written()

    def test_bodies_over_one_mebibyte_get_413(self) -> None:
        # A call declaring more than the limit is refused before a byte of its body reaches
        # the guard, with a token or without; its client, still sending, reads the answer
        # (the server reads on: codex_site.bodies).
        body = b"x" * (1024 * 1024 + 1)
        for authorization in (f"Authorization: Bearer {self.token}\r\n", ""):
            with self.subTest(token=bool(authorization)):
                head = (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                    f"{authorization}Content-Length: {len(body)}\r\n\r\n"
                ).encode()
                answer, _ = raw_request(self.live.port, head, body)
                self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer[:200])
        self.assert_nothing_written()
