"""deploy/history_check.py, the checker over a try_network.sh run: a clean history passes, and
each invariant fails on a violation planted for it (and only the invariants it breaks)."""

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from django.test import SimpleTestCase

from tests import deploy_scripts

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "deploy" / "history_check.py"


history_check = deploy_scripts.load("history_check")

E1 = "11111111-1111-4111-8111-111111111111"
E2 = "22222222-2222-4222-8222-222222222222"


class Story:
    """A history told call by call, and the database it leaves behind on three nodes."""

    def __init__(self) -> None:
        self.history: list[dict] = []
        self.clock = 0.0
        self.entries: dict[str, dict] = {}
        self.revisions: dict[tuple[str, int], dict] = {}
        self.keys: list[dict] = []

    def call(self, op: str, args: dict, answer: str = "ok", took: float = 0.01, **result) -> dict:
        self.clock += 0.1
        record = {
            "op": op,
            "process": "w1",
            "token": result.pop("token", "main"),
            "invoked": self.clock,
            "completed": self.clock + took,
            "answer": answer,
            "args": args,
            **result,
        }
        self.history.append(record)
        return record

    def commit(self, entry_id: str, revision: int, entry_input: dict) -> dict:
        state = {
            "id": entry_id,
            "revision": revision,
            "content": entry_input["content"],
            "tags": entry_input.get("tags", []),
            "relatedAgentIds": [],
        }
        self.entries[entry_id] = state
        self.revisions[(entry_id, revision)] = dict(state)
        return dict(state)

    def save(self, request_id: str, entry_id: str, content: str, answer: str = "ok", applied: bool = True) -> dict:
        entry_input = {"content": content, "tags": ["t"]}
        state = None
        if applied:
            state = self.commit(entry_id, 1, entry_input)
            self.keys.append({"request_id": request_id, "entry": entry_id})
        result = {"entry": state} if answer == "ok" else {}
        return self.call("save", {"requestId": request_id, "entry": entry_input}, answer, **result)

    def update(self, entry_id: str, expected: int, content: str, answer: str = "ok", applied: bool = True) -> dict:
        entry_input = {"content": content, "tags": ["t"]}
        state = self.commit(entry_id, expected + 1, entry_input) if applied else None
        result = {"entry": state} if answer == "ok" else {}
        args = {"id": entry_id, "expectedRevision": expected, "entry": entry_input}
        return self.call("update", args, answer, **result)

    def get(self, entry_id: str, state: dict | None = None, **options) -> dict:
        state = state if state is not None else dict(self.entries[entry_id])
        return self.call("get", {"id": entry_id}, entry=state, **options)

    def search(self) -> dict:
        summaries = []
        for state in sorted(self.entries.values(), key=lambda e: e["id"]):
            summary = {k: v for k, v in state.items() if k != "content"}
            summary.update(excerpt=state["content"][:160], contentBytes=len(state["content"].encode()))
            summaries.append(summary)
        return self.call("search", {}, entries=summaries)

    def fault(
        self, name: str, start: float, end: float, heal: float | None = None, gap_limit: float | None = None
    ) -> None:
        record = {"op": "fault", "name": name, "start": start, "end": end}
        if heal is not None:
            record["heal"] = heal
        if gap_limit is not None:
            record["gap_limit"] = gap_limit
        self.history.append(record)

    def node(self) -> dict:
        return {
            "entries": [dict(e) for e in self.entries.values()],
            "revisions": [dict(r) for r in self.revisions.values()],
            "request_keys": [dict(k) for k in self.keys],
        }

    def final(self) -> dict:
        return {name: self.node() for name in ("db1", "db2", "db3")}


def clean_story() -> Story:
    story = Story()
    story.save("r1", E1, "save r1 n1")
    story.save("r2", E2, "save r2 n2", answer="unavailable")  # committed, its answer lost
    story.save("r2", E2, "save r2 n2", applied=False)  # the retry returns the same entry
    story.history[-1]["entry"] = dict(story.entries[E2])
    story.update(E1, 1, "update n3")
    story.update(E1, 1, "update n4", answer="conflict", applied=False)  # lost the race
    story.update(E1, 2, "update n5", answer="503")  # refused, then retried
    story.update(E1, 2, "update n5", answer="unavailable", applied=False)
    story.update(E1, 2, "update n5")
    story.get(E1)
    story.search()
    story.call("revoke", {}, token="victim")
    story.call("get", {"id": E1}, "401", token="victim")
    return story


def violated(report) -> set[str]:
    return {name for name, found in report.violations.items() if found}


class CleanHistoryTest(SimpleTestCase):
    def test_a_clean_history_passes_every_invariant(self) -> None:
        story = clean_story()
        report = history_check.check(story.history, story.final())
        self.assertTrue(report.ok, history_check.render(report))
        self.assertEqual(report.stats["saves_acknowledged"], 2)
        self.assertEqual(report.stats["updates_acknowledged"], 2)
        self.assertEqual(report.stats["entries"], 2)
        self.assertEqual(report.stats["revisions"], 4)

    def test_an_indeterminate_save_that_committed_is_neither_a_duplicate_nor_a_phantom(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1", answer="no answer (ReadTimeout)")
        story.search()
        report = history_check.check(story.history, story.final())
        self.assertEqual(violated(report), {"unexpected_answers"})  # only the missing answer
        self.assertEqual(report.stats["indeterminate_applied"], 1)

    def test_the_command_line_exits_0_then_1(self) -> None:
        story = clean_story()
        with tempfile.TemporaryDirectory() as directory:
            history, final = Path(directory, "history.jsonl"), Path(directory, "final.json")
            history.write_text("".join(json.dumps(record) + "\n" for record in story.history))
            final.write_text(json.dumps(story.final()))
            run = [sys.executable, str(CHECKER), str(history), str(final)]
            self.assertEqual(subprocess.run(run, capture_output=True, timeout=60).returncode, 0)
            broken = story.final()
            del broken["db2"]["entries"][0]
            final.write_text(json.dumps(broken))
            done = subprocess.run(run, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 1)
        self.assertIn("FAIL  divergent_nodes", done.stdout)


class PlantedViolationTest(SimpleTestCase):
    def assert_violates(self, history: list[dict], final: dict, *expected: str) -> None:
        report = history_check.check(history, final)
        self.assertEqual(violated(report), set(expected), history_check.render(report))

    def test_an_acknowledged_save_missing_everywhere_is_lost(self) -> None:
        story = clean_story()
        final = story.final()
        for node in final.values():
            node["entries"] = [e for e in node["entries"] if e["id"] != E2]
            node["revisions"] = [r for r in node["revisions"] if r["id"] != E2]
            node["request_keys"] = [k for k in node["request_keys"] if k["entry"] != E2]
        self.assert_violates(story.history, final, "lost")

    def test_an_acknowledged_update_overwritten_at_its_revision_is_lost(self) -> None:
        # An isolated old primary acknowledged revision 2; the new one made another revision 2.
        story = Story()
        story.save("r1", E1, "save r1 n1")
        story.update(E1, 1, "update on the old primary")
        story.update(E1, 1, "update on the new primary", answer="unavailable")
        self.assert_violates(story.history, story.final(), "lost")

    def test_an_acknowledged_write_missing_on_one_node_is_lost_and_divergent(self) -> None:
        story = clean_story()
        final = story.final()
        final["db3"]["revisions"] = [r for r in final["db3"]["revisions"] if r["content"] != "update n5"]
        final["db3"]["entries"] = [e for e in final["db3"]["entries"] if e["id"] != E1] + [
            {**final["db3"]["entries"][0], "id": E1, "revision": 2, "content": "update n3"}
        ]
        self.assert_violates(story.history, final, "lost", "divergent_nodes")

    def test_a_retried_save_that_made_a_second_entry_is_a_duplicate(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1", answer="unavailable")
        story.save("r1", E2, "save r1 n1")  # the retry made another entry
        final = story.final()
        for node in final.values():
            node["request_keys"] = [{"request_id": "r1", "entry": E2}]  # the first lost its key
        report = history_check.check(story.history, final)
        self.assertIn("duplicates", violated(report))
        self.assertIn("db1: 2 entries were made by the save of 'save r1 n1'", report.violations["duplicates"])

    def test_one_request_id_acknowledged_with_two_entries_is_a_duplicate(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1")
        second = story.save("r1", E2, "save r1 n1", applied=False)
        second["entry"] = {**story.entries[E1], "id": E2}
        report = history_check.check(story.history, story.final())
        self.assertIn("duplicates", violated(report))
        self.assertIn(f"save r1 acknowledged with entry {E1} and with {E2}", report.violations["duplicates"])

    def test_two_updates_acknowledged_from_one_revision_are_double_applied(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1")
        story.update(E1, 1, "update a")
        racing = story.update(E1, 1, "update b", applied=False)
        racing["entry"] = story.commit(E1, 3, racing["args"]["entry"])  # applied on top, as revision 3
        report = history_check.check(story.history, story.final())
        self.assertIn("double_applied", violated(report))
        self.assertIn("answered revision 3", "\n".join(report.violations["double_applied"]))

    def test_a_revision_chain_with_a_hole_is_double_applied(self) -> None:
        story = clean_story()
        final = story.final()
        for node in final.values():
            node["revisions"] = [r for r in node["revisions"] if not (r["id"] == E1 and r["revision"] == 2)]
        report = history_check.check(story.history, final)
        self.assertIn("double_applied", violated(report))
        self.assertIn("has revisions 1,3", "\n".join(report.violations["double_applied"]))

    def test_one_write_in_two_revisions_is_double_applied(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1")
        story.update(E1, 1, "update n2", answer="unavailable")
        again = story.commit(E1, 3, {"content": "update n2", "tags": ["t"]})  # applied twice
        story.get(E1, again)
        report = history_check.check(story.history, story.final())
        self.assertIn("double_applied", violated(report))

    def test_a_read_of_a_state_nobody_wrote_is_a_phantom(self) -> None:
        story = clean_story()
        story.get(E1, {**story.entries[E1], "content": "never written"})
        self.assert_violates(story.history, story.final(), "phantom_reads")

    def test_a_read_of_a_write_refused_outright_is_a_phantom(self) -> None:
        story = clean_story()
        story.get(E1, {**story.entries[E1], "revision": 2, "content": "update n4"})  # the conflict's
        report = history_check.check(story.history, story.final())
        self.assertEqual(violated(report), {"phantom_reads"})
        self.assertIn("revision 2 was never written", report.violations["phantom_reads"][0])

    def test_a_read_older_than_an_acknowledged_revision_is_stale(self) -> None:
        story = clean_story()
        story.get(E1, story.revisions[(E1, 2)])
        report = history_check.check(story.history, story.final())
        self.assertEqual(violated(report), {"phantom_reads"})
        self.assertIn("stale read", report.violations["phantom_reads"][0])

    def test_a_search_summary_of_a_state_nobody_wrote_is_a_phantom(self) -> None:
        story = clean_story()
        page = story.search()
        page["entries"][0]["excerpt"] = "changed"
        self.assert_violates(story.history, story.final(), "phantom_reads")

    def test_a_revision_in_the_database_that_no_call_wrote_is_a_phantom(self) -> None:
        story = clean_story()
        story.commit(E2, 2, {"content": "written behind the clients' backs", "tags": ["t"]})
        self.assert_violates(story.history, story.final(), "phantom_reads")

    def test_a_success_with_a_token_after_its_revocation_is_refused_is_caught(self) -> None:
        story = clean_story()
        story.get(E1, token="victim")
        self.assert_violates(story.history, story.final(), "revoked_token")

    def test_a_success_while_the_revocation_is_in_flight_is_allowed(self) -> None:
        story = Story()
        story.save("r1", E1, "save r1 n1")
        revoke = story.call("revoke", {}, token="victim", took=1.0)
        story.get(E1, token="victim")  # invoked before the revocation's answer
        self.assertLess(story.history[-1]["invoked"], revoke["completed"])
        self.assert_violates(story.history, story.final())

    def test_a_401_for_a_token_nobody_revoked_is_unexpected(self) -> None:
        story = clean_story()
        story.call("get", {"id": E1}, "401")
        self.assert_violates(story.history, story.final(), "unexpected_answers")

    def test_a_500_an_internal_error_and_no_answer_are_unexpected(self) -> None:
        for answer in ("http 500", "internal", "no answer (ReadTimeout)", "http 504", "not_found"):
            with self.subTest(answer=answer):
                story = clean_story()
                story.call("get", {"id": E1}, answer, took=30.0)
                self.assert_violates(story.history, story.final(), "unexpected_answers")

    def test_nodes_that_differ_are_divergent(self) -> None:
        story = clean_story()
        final = story.final()
        final["db2"]["request_keys"].append({"request_id": "r9", "entry": E1})
        report = history_check.check(story.history, final)
        self.assertIn("divergent_nodes", violated(report))

    def test_writes_refused_past_the_limit_during_a_fault_fail(self) -> None:
        story = clean_story()
        story.clock = 100.0
        story.save("r3", "33333333-3333-4333-8333-333333333333", "save r3 n9")
        story.clock = 131.4  # 31.4 s after the first one's answer
        story.save("r4", "44444444-4444-4444-8444-444444444444", "save r4 n10")
        story.fault("primary partitioned", 105.0, 140.0)
        report = history_check.check(story.history, story.final())
        self.assertEqual(violated(report), {"write_gaps"})
        self.assertEqual(report.faults[0]["longest_without_ack"], 31.4)

        shorter = copy.deepcopy(story)
        shorter.history = [r for r in shorter.history if r["op"] != "fault"]
        shorter.fault("primary partitioned", 105.0, 125.0)  # over 24.9 s after the last acknowledgement
        self.assertEqual(violated(history_check.check(shorter.history, shorter.final())), set())

    def test_a_fault_that_names_a_tighter_limit_is_held_to_it(self) -> None:
        story = clean_story()
        story.clock = 100.0
        story.save("r3", "33333333-3333-4333-8333-333333333333", "save r3 n9")
        story.clock = 121.0  # 21 s after the first one's answer: within 30 s, past 20 s
        story.save("r4", "44444444-4444-4444-8444-444444444444", "save r4 n10")
        story.fault("synchronous standby silent after a failover", 100.5, 130.0, gap_limit=20.0)
        report = history_check.check(story.history, story.final())
        self.assertEqual(violated(report), {"write_gaps"})
        self.assertIn("limit 20 s", report.violations["write_gaps"][0])

        default = copy.deepcopy(story)
        default.history = [r for r in default.history if r["op"] != "fault"]
        default.fault("primary partitioned", 100.5, 130.0)
        self.assertEqual(violated(history_check.check(default.history, default.final())), set())

    def test_a_fault_with_a_heal_must_resume_within_the_limit_of_it(self) -> None:
        story = clean_story()
        story.clock = 200.0
        story.save("r3", "33333333-3333-4333-8333-333333333333", "save r3 n9")
        story.clock = 300.0
        story.save("r4", "44444444-4444-4444-8444-444444444444", "save r4 n10")
        story.fault("etcd majority lost", 201.0, 320.0, heal=280.0)  # resumed 20 s after the heal
        self.assert_violates(story.history, story.final())
        late = [r for r in story.history if r["op"] != "fault"]
        late.append({"op": "fault", "name": "etcd majority lost", "start": 201.0, "end": 320.0, "heal": 260.0})
        self.assert_violates(late, story.final(), "write_gaps")

    def test_a_faults_row_names_the_violations_of_its_window_and_of_the_final_state(self) -> None:
        story = clean_story()
        story.clock = 50.0
        story.call("get", {"id": E1}, "http 500")  # invoked at 50.1
        final = story.final()
        final["db3"]["request_keys"].append({"request_id": "r9", "entry": E1})  # seen only at the end
        report = history_check.check(story.history, final)
        at_the_end = ["divergent_nodes", "duplicates"]
        self.assertEqual(report.violated_between(40, 60), [*at_the_end, "unexpected_answers"])
        self.assertEqual(report.violated_between(0, 10), at_the_end)
