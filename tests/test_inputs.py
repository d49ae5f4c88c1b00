"""The rules of ``common.inputs`` on their own: JSON a stranger sent (``json_document``) and what
a name may contain (``name_problem``). Every door's use of them is in
tests/test_inputs_at_every_door.py."""

import json
import math
from pathlib import Path

from django.test import SimpleTestCase
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from common.inputs import SURROGATE, JSONRefused, bearer_credential, json_document, name_cleaned, name_problem

# JSON as json.dumps writes it from values any client could mean: texts without lone surrogates,
# finite numbers.
text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)
lone_surrogate = st.characters(categories=["Cs"])
# How deep a document nests: the parser refuses past its limit (about 200 levels), always in words.
PAST_THE_LIMIT = st.integers(min_value=202, max_value=20_000)


def nested(depth: int, kinds: list[bool]) -> bytes:
    """``depth`` arrays and objects inside one another (``kinds[i]``: an object at level i)."""
    opened = b"".join(b'{"k":' if kinds[level % len(kinds)] else b"[" for level in range(depth))
    closed = b"".join(b"}" if kinds[level % len(kinds)] else b"]" for level in reversed(range(depth)))
    return opened + b"0" + closed


def strings_in(value: object):
    """Every text of a parsed document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def numbers_in(value: object):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from numbers_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers_in(item)


class JSONDocumentTest(SimpleTestCase):
    @examples(max_examples=300, deadline=None)
    @given(raw=st.binary(max_size=200) | st.text(alphabet=st.characters(codec=None), max_size=200))
    def test_whatever_it_is_given_it_parses_or_refuses_in_words_and_never_lets_a_lone_surrogate_or_infinity_by(
        self, raw
    ) -> None:
        try:
            document = json_document(raw)
        except JSONRefused as refused:
            self.assertTrue(refused.problem.startswith("it "), refused.problem)
            self.assertEqual(refused.code, "invalid_json")
            return
        self.assertFalse(any(SURROGATE.search(found) for found in strings_in(document)))
        self.assertTrue(all(math.isfinite(number) for number in numbers_in(document)))

    @examples(max_examples=200, deadline=None)
    @given(value=json_values, as_text=st.booleans())
    def test_it_reads_back_any_json_a_client_could_mean(self, value, as_text: bool) -> None:
        raw = json.dumps(value, ensure_ascii=as_text)
        self.assertEqual(json_document(raw if as_text else raw.encode()), value)

    @examples(max_examples=50, deadline=None)
    @given(depth=PAST_THE_LIMIT, kinds=st.lists(st.booleans(), min_size=1, max_size=4))
    def test_nesting_past_the_limit_is_refused_as_nested_too_deeply(self, depth: int, kinds: list[bool]) -> None:
        with self.assertRaisesMessage(JSONRefused, "it is nested too deeply"):
            json_document(nested(depth, kinds))
        with self.assertRaisesMessage(JSONRefused, "it is nested too deeply"):
            json_document(b"[" * depth)  # never closed: the depth is found first

    @examples(max_examples=50, deadline=None)
    @given(depth=st.integers(min_value=1, max_value=200), kinds=st.lists(st.booleans(), min_size=1, max_size=4))
    def test_nesting_within_the_limit_is_read(self, depth: int, kinds: list[bool]) -> None:
        self.assertIsNotNone(json_document(nested(depth, kinds)))

    @examples(max_examples=200, deadline=None)
    @given(
        before=text,
        surrogate=lone_surrogate,
        after=text,
        in_key=st.booleans(),
        form=st.sampled_from(["escaped", "a text", "WTF-8 bytes"]),
    )
    def test_a_lone_surrogate_in_a_string_or_a_key_is_refused_however_it_is_written(
        self, before: str, surrogate: str, after: str, in_key: bool, form: str
    ) -> None:
        string = before + surrogate + after
        value = {string: 1} if in_key else {"k": [string]}
        if form == "escaped":
            raw: bytes | str = json.dumps(value).encode()  # "\udXXX", as json.dumps writes it
        elif form == "a text":
            raw = json.dumps(value, ensure_ascii=False)
        else:
            raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
        with self.assertRaisesMessage(JSONRefused, "it is not JSON"):
            json_document(raw)

    def test_nan_and_infinity_are_refused_as_tokens_and_as_numbers_too_large(self) -> None:
        for raw in [b"NaN", b"[Infinity]", b'{"a": -Infinity}', b"nan", b"inf"]:
            with self.subTest(raw=raw), self.assertRaisesMessage(JSONRefused, "it is not JSON"):
                json_document(raw)
        for raw in [b"1e400", b'{"a": [-1E+309]}', b"1" + b"0" * 400 + b".5", b"1" + b"0" * 250 + b"e99"]:
            with self.subTest(raw=raw[:20]), self.assertRaisesMessage(JSONRefused, "a number too large to be finite"):
                json_document(raw)
        # Large but finite, and an exponent that only looks large, are numbers like any other.
        self.assertEqual(json_document(b"[1e308, 1e-400, 12345678901234567890]"), [1e308, 0.0, 12345678901234567890])
        self.assertEqual(json_document(b'{"kid": "3e4f", "n": 2.5e10}'), {"kid": "3e4f", "n": 2.5e10})

    def test_a_caller_may_ask_for_an_object(self) -> None:
        self.assertEqual(json_document(b'{"a": 1}', must_be_object=True), {"a": 1})
        for raw in [b"[]", b"1", b'"a"', b"null"]:
            with self.subTest(raw=raw), self.assertRaisesMessage(JSONRefused, "it is not a JSON object"):
                json_document(raw, must_be_object=True)

    def test_what_is_not_json_is_refused_with_the_parsers_words(self) -> None:
        for raw in [b"", b"{", b"[1,]", b"{} x", b"\xef\xbb\xbf{}", b"\xff", "{'a': 1}", b"1" * 5_000]:
            with self.subTest(raw=raw[:20]), self.assertRaisesMessage(JSONRefused, "it is not JSON ("):
                json_document(raw)


NAMES_ACCEPTED = {
    "plain": "Claude",
    "a no-break space": "Acme\u00a0Agent",
    "an ideographic space": "エージェント\u3000一号",
    "a narrow no-break space": "Agent\u202f:",
    "an emoji joined by ZWJ": "\U0001f469\u200d\U0001f4bb Dev",
    "a Persian word with ZWNJ": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # mi-khaham
    "a combining accent": "Ame\u0301lie",
    "a private-use character": "Agent \uf8ff",
    "empty": "",
}
NAMES_REFUSED = {
    "a control character": ("Evil\x1b[31mAgent", "control character (U+001B)"),
    "a tab": ("Evil\tAgent", "control character (U+0009)"),
    "a right-to-left override": ("Evil\u202eAgent", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    "a right-to-left isolate": ("Evil\u2067Agent", "U+2067"),
    "a line separator": ("Evil\u2028Agent", "U+2028 LINE SEPARATOR"),
    "a paragraph separator": ("Evil\u2029Agent", "U+2029 PARAGRAPH SEPARATOR"),
    "a zero-width space": ("Cl\u200baude", "U+200B ZERO WIDTH SPACE"),
    "a byte order mark": ("\ufeffClaude", "U+FEFF"),
    "a soft hyphen": ("Cl\u00adaude", "U+00AD SOFT HYPHEN"),
    "a tag character": ("Claude\U000e0041", "U+E0041"),
    "a lone surrogate": ("Agent\ud800", "unpaired surrogate (U+D800)"),
}


class NameRuleTest(SimpleTestCase):
    def test_it_accepts_names_that_show_themselves(self) -> None:
        for case, name in NAMES_ACCEPTED.items():
            with self.subTest(case):
                self.assertIsNone(name_problem(name, max_chars=255, what="the name"))
                self.assertEqual(name_cleaned(name), name)

    def test_it_refuses_what_changes_how_the_text_around_it_is_shown_in_words(self) -> None:
        for case, (name, words) in NAMES_REFUSED.items():
            with self.subTest(case):
                self.assertIn(words, name_problem(name, max_chars=255, what="the name") or "")
                self.assertIsNone(name_problem(name_cleaned(name), max_chars=255, what="the name"))

    def test_it_refuses_what_is_not_a_text_and_what_is_too_long(self) -> None:
        self.assertEqual(name_problem(None, max_chars=255, what="the name"), "the name must be a string")
        self.assertIn("the limit is 3", name_problem("abcd", max_chars=3, what="the name") or "")

    @examples(max_examples=500, deadline=None)
    @given(name=st.text(alphabet=st.characters(codec=None), max_size=40))
    def test_a_cleaned_name_is_accepted_and_an_accepted_name_is_its_own_cleaned_form(self, name: str) -> None:
        cleaned = name_cleaned(name)
        self.assertEqual(len(cleaned), len(name))
        self.assertIsNone(name_problem(cleaned, max_chars=40, what="the name"))
        self.assertEqual(cleaned == name, name_problem(name, max_chars=40, what="the name") is None)


class BearerCredentialTest(SimpleTestCase):
    def test_the_credential_of_a_bearer_header_and_nothing_else(self) -> None:
        cases = {
            "Bearer abc": "abc",
            "bearer  abc ": "abc",
            "BEARER abc": "abc",
            "Bearer": None,
            "Bearer   ": None,
            "Basic abc": None,
            "Bearerabc": None,
            "": None,
            None: None,
        }
        for header, credential in cases.items():
            with self.subTest(header=header):
                self.assertEqual(bearer_credential(header), credential)

    def test_every_door_reads_a_bearer_header_through_it(self) -> None:
        # /mcp, SCIM and /metrics each parsed the header themselves, one way each.
        root = Path(__file__).resolve().parent.parent
        readers = [
            str(path.relative_to(root))
            for package in ("authserver", "mcp_endpoint", "codex_site", "codex_metrics", "notebook", "common")
            for path in (root / package).rglob("*.py")
            if '"bearer"' in path.read_text().lower()
        ]
        self.assertEqual(readers, ["common/inputs.py"])
