"""Every limit of contract section 3, at the boundary and one past it."""

from notebook.exceptions import InvalidArgument
from notebook.models import Entry, EntryRevision, RequestKey
from notebook.validation import fingerprint_of, parse_entry_input, parse_request_id, parse_search_params
from tests.base import NotebookTestCase, nested

EURO = "\u20ac"  # three bytes in UTF-8
PILE_OF_POO = "\U0001f4a9"  # four bytes in UTF-8


class EntryInputLimitsTest(NotebookTestCase):
    def assert_accepted(self, **entry) -> None:
        saved = self.save(**entry)
        self.assertEqual(Entry.objects.get(pk=saved.pk).revision, 1)

    def assert_refused(self, message_part: str, **entry) -> None:
        before = (Entry.objects.count(), EntryRevision.objects.count(), RequestKey.objects.count())
        with self.assertRaises(InvalidArgument) as caught:
            self.save(**entry)
        self.assertIn(message_part, caught.exception.message)
        self.assertEqual(caught.exception.code, "invalid_argument")
        after = (Entry.objects.count(), EntryRevision.objects.count(), RequestKey.objects.count())
        self.assertEqual(before, after, "a refused entry must write nothing")

    def test_it_accepts_content_of_exactly_65536_bytes_of_multibyte_characters(self) -> None:
        content = PILE_OF_POO * 16_384  # 65,536 bytes, 16,384 characters
        self.assertEqual(len(content.encode()), 65_536)
        saved = self.save(content=content)
        self.assertEqual(Entry.objects.get(pk=saved.pk).content, content)
        self.assertEqual(saved.content_bytes, 65_536)

    def test_it_refuses_content_of_65537_bytes(self) -> None:
        content = EURO * 21_845 + "ab"  # 65,535 + 2 bytes
        self.assertEqual(len(content.encode()), 65_537)
        self.assert_refused("65537 bytes", content=content)

    def test_it_refuses_empty_content(self) -> None:
        self.assert_refused("entry.content must not be empty", content="")

    def test_it_keeps_content_exactly_as_given(self) -> None:
        content = "  leading and trailing  \n\tcafe\u0301 \ufb01 \r\n"
        saved = self.save(content=content)
        self.assertEqual(Entry.objects.get(pk=saved.pk).content, content)

    def test_it_refuses_nul_in_content(self) -> None:
        self.assert_refused("U+0000", content="before\x00after")

    def test_it_refuses_unpaired_surrogates(self) -> None:
        self.assert_refused("unpaired surrogate", content="broken \ud800 text")
        self.assert_refused("unpaired surrogate", content="ok", title="bad \udfff")

    def test_title_limits(self) -> None:
        self.assert_accepted(title="t" * 200)
        self.assert_accepted(title=PILE_OF_POO * 200)
        self.assert_refused("201 characters", title="t" * 201)
        self.assert_refused("entry.title must not be empty", title="")
        self.assert_refused("control character (U+0007)", title="bell\x07")
        self.assert_refused("control character (U+0085)", title="next\x85line")
        self.assert_refused("control character (U+000A)", title="two\nlines")

    def test_tag_limits(self) -> None:
        self.assert_accepted(tags=[f"t{i}" for i in range(32)])
        self.assert_refused("33 items", tags=[f"t{i}" for i in range(33)])
        self.assert_accepted(tags=["x" * 64])
        self.assert_refused("entry.tags[0] is 65 characters", tags=["x" * 65])
        self.assert_refused("entry.tags[1] must not be empty", tags=["a", ""])
        self.assert_refused("entry.tags[1] repeats 'a'", tags=["a", "a"])
        self.assert_refused("control character", tags=["tab\there"])
        self.assert_accepted(tags=["Launch", "launch"])  # case-sensitive, so not duplicates

    def test_related_agent_id_limits(self) -> None:
        self.assert_accepted(relatedAgentIds=[f"agent-{i}" for i in range(32)])
        self.assert_refused("33 items", relatedAgentIds=[f"agent-{i}" for i in range(33)])
        self.assert_accepted(relatedAgentIds=["a" * 512])
        self.assert_refused("513 characters", relatedAgentIds=["a" * 513])
        self.assert_refused("repeats", relatedAgentIds=["agent", "agent"])
        self.assert_refused("control character", relatedAgentIds=["agent\x1b"])
        self.assert_refused("must not be empty", relatedAgentIds=[""])

    def test_provenance_depth_counts_the_provenance_object_as_one(self) -> None:
        self.assert_accepted(provenance=nested(8))
        self.assert_refused("deeper than 8", provenance=nested(9))
        # Arrays are nesting levels too.
        self.assert_accepted(provenance={"a": [[[[[[["seven deep"]]]]]]]})
        self.assert_refused("deeper than 8", provenance={"a": [[[[[[[["eight deep"]]]]]]]]})

    def test_provenance_size_is_compact_utf8_json(self) -> None:
        overhead = len('{"s":""}')
        self.assert_accepted(provenance={"s": "x" * (8_192 - overhead)})
        self.assert_refused("8193 bytes", provenance={"s": "x" * (8_193 - overhead)})
        # Multi-byte characters count as their UTF-8 bytes, not as \u escapes.
        self.assert_accepted(provenance={"s": EURO * ((8_192 - overhead) // 3)})
        self.assert_refused("bytes as compact UTF-8 JSON", provenance={"s": EURO * ((8_192 - overhead) // 3 + 1)})

    def test_provenance_refuses_nul_in_any_string_or_key(self) -> None:
        self.assert_refused("U+0000", provenance={"s": "a\x00b"})
        self.assert_refused("U+0000", provenance={"list": ["fine", {"deep": "\x00"}]})
        self.assert_refused("key containing U+0000", provenance={"k\x00": 1})

    def test_provenance_must_be_an_object_of_json_values(self) -> None:
        self.assert_refused("must be an object", provenance=["not", "an", "object"])
        self.assert_refused("not a finite number", provenance={"n": float("nan")})
        self.assert_accepted(provenance={"ok": [1, 2.5, None, True, "s", {}]})

    def test_it_refuses_null_in_place_of_an_absent_field(self) -> None:
        for field in ["title", "tags", "relatedAgentIds", "provenance"]:
            self.assert_refused(f"entry.{field} must be omitted rather than null", **{field: None})

    def test_it_refuses_unknown_members(self) -> None:
        self.assert_refused("unknown member 'owner'", owner="bob")

    def test_request_id_limits(self) -> None:
        self.assertEqual(parse_request_id("r" * 128), "r" * 128)
        for bad, message in [("r" * 129, "129 characters"), ("", "must not be empty"), ("a\x00", "control")]:
            with self.assertRaises(InvalidArgument) as caught:
                parse_request_id(bad)
            self.assertIn(message, caught.exception.message)


class FingerprintTest(NotebookTestCase):
    def test_fingerprint_is_independent_of_key_order(self) -> None:
        one = {"content": "c", "title": "t", "provenance": {"a": 1, "b": {"x": 1, "y": 2}}}
        two = {"provenance": {"b": {"y": 2, "x": 1}, "a": 1}, "title": "t", "content": "c"}
        self.assertEqual(fingerprint_of(one), fingerprint_of(two))
        self.assertEqual(parse_entry_input(one).fingerprint, parse_entry_input(two).fingerprint)

    def test_fingerprint_depends_on_tag_order(self) -> None:
        self.assertNotEqual(
            fingerprint_of({"content": "c", "tags": ["a", "b"]}),
            fingerprint_of({"content": "c", "tags": ["b", "a"]}),
        )

    def test_fingerprint_is_sha256_of_canonical_json(self) -> None:
        import hashlib

        raw = {"title": "caf\u00e9", "content": "x"}
        expected = hashlib.sha256('{"content":"x","title":"café"}'.encode()).hexdigest()
        self.assertEqual(fingerprint_of(raw), expected)


class SearchParamLimitsTest(NotebookTestCase):
    def test_limits(self) -> None:
        self.assertEqual(parse_search_params().limit, 20)
        self.assertEqual(parse_search_params(limit=50).limit, 50)
        self.assertEqual(parse_search_params(query="q" * 256).query, "q" * 256)
        for kwargs in [
            {"limit": 0},
            {"limit": 51},
            {"limit": True},
            {"query": "q" * 257},
            {"tag": ""},
            {"tag": "t" * 65},
            {"related_agent_id": "a" * 513},
            {"cursor": "c" * 2049},
            {"cursor": ""},
        ]:
            with self.subTest(**{k: str(v)[:10] for k, v in kwargs.items()}):
                with self.assertRaises(InvalidArgument):
                    parse_search_params(**kwargs)
