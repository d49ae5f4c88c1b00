"""A checker over the history of a run of deploy/try_network.sh, and the final state read from
every database node: what Agent Codex promises, proved (or refuted) from the record alone.

The history is one JSON object per line, one per call a client made (and one per fault):

    {"op": "save" | "update" | "get" | "search" | "revoke", "process": "w3", "token": "main",
     "invoked": 12.031, "completed": 12.047, "answer": "ok", "args": {...},
     "entry": {...} (a save's, update's or get's answer), "entries": [...] (a search page's)}
    {"op": "fault", "name": "primary partitioned", "start": 40.2, "heal": 61.0, "end": 75.3}
    {"op": "fault", "name": "synchronous replica cut off", "start": 90.0, "end": 121.4, "gap_limit": 20}

Times are seconds on one monotonic clock (the client host's). ``answer`` is ``ok``, a tool
error's code (``unavailable``, ``conflict``, ``not_found``...), an HTTP status (``503``,
``401``, ``http 500``) or ``no answer (...)`` when the client's timeout passed or the
connection broke. Each write carries a nonce in its content, so a state read back names the
write that made it.

A write answered ``ok`` is **acknowledged**. One answered ``unavailable``, ``503`` or not at
all is **indeterminate**: it may have committed (its answer lost) or not. One answered
``conflict`` (an update whose revision moved) did not write. The final state, per node, is
``{"entries": [...], "revisions": [...], "request_keys": [...]}`` of the run's codex, read
straight from each PostgreSQL.

What it proves, each an entry of ``Report.violations``:

- ``lost``: every acknowledged save's entry and every acknowledged update's revision (its
  content) is in every node's final state;
- ``duplicates``: no save made two entries (every entry has one request key, one request id
  names one entry, and every acknowledgement of one request id named the same entry);
- ``double_applied``: no two updates were acknowledged from the same revision, an update's
  answer is the revision after the one it expected, no write's content is in two revisions,
  and each entry's revisions are one chain, 1, 2, 3... up to its current one;
- ``phantom_reads``: every state a read returned, and every revision in the database, was
  written by a call that was not refused outright (and had been invoked by then); and no read
  returned a revision older than one acknowledged before the read began;
- ``revoked_token``: no call with a revoked token succeeded once the revocation had been
  acknowledged;
- ``divergent_nodes``: every node holds the same entries, revisions and request keys;
- ``unexpected_answers``: every answer is a success, a refusal (``unavailable``, ``503``), a
  ``conflict`` of a racing update, or a ``401`` for a revoked token: never a 500, another
  error, or no answer within the client's timeout;
- ``write_gaps``: during each fault, writes were refused for at most ``GAP_LIMIT`` seconds,
  or the fault's own ``gap_limit`` where it names a tighter one (the synchronous-standby
  faults: 20 s); for a fault with a ``heal``, they resumed within that limit of it.

    python deploy/history_check.py history.jsonl final.json    # exit 1 on any violation
"""

import argparse
import itertools
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

GAP_LIMIT = 30.0
INDETERMINATE = ("unavailable", "503")
WRITES = ("save", "update")
READS = ("get", "search")
EXCERPT_CHARS = 160
INVARIANTS = (
    "lost",
    "duplicates",
    "double_applied",
    "phantom_reads",
    "revoked_token",
    "divergent_nodes",
    "unexpected_answers",
    "write_gaps",
)


def indeterminate(answer: str) -> bool:
    return answer in INDETERMINATE or answer.startswith("no answer")


def state_of_input(entry_input: dict) -> dict:
    """The fields an entry input decides, as an answer shows them."""
    state = {
        "content": entry_input["content"],
        "tags": list(entry_input.get("tags", [])),
        "relatedAgentIds": list(entry_input.get("relatedAgentIds", [])),
    }
    for name in ("title", "provenance"):
        if name in entry_input:
            state[name] = entry_input[name]
    return state


def state_of_entry(entry: dict) -> dict:
    """The same fields of an entry from an answer or the database."""
    state = {
        "content": entry["content"],
        "tags": entry.get("tags", []),
        "relatedAgentIds": entry.get("relatedAgentIds", []),
    }
    for name in ("title", "provenance"):
        if entry.get(name) is not None:
            state[name] = entry[name]
    return state


def summary_matches(summary: dict, state: dict) -> bool:
    """A search's summary shows the excerpt, size, title and tags of a full state."""
    return (
        summary.get("excerpt") == state["content"][:EXCERPT_CHARS]
        and summary.get("contentBytes") == len(state["content"].encode())
        and summary.get("tags", []) == state["tags"]
        and summary.get("relatedAgentIds", []) == state["relatedAgentIds"]
        and summary.get("title") == state.get("title")
    )


@dataclass
class Write:
    """One write as clients meant it; its attempts (a refused save or update is retried with
    the same arguments) share its content."""

    kind: str  # save | update
    content: str
    state: dict
    request_id: str | None = None
    entry_id: str | None = None  # an update's target, or a save's once acknowledged
    revision: int | None = None  # the revision it makes: 1 for a save, expected + 1 for an update
    first_invoked: float = float("inf")
    acknowledged_at: float | None = None
    possible: bool = False  # acknowledged or indeterminate at least once


@dataclass
class Report:
    violations: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in INVARIANTS})
    # When each violation happened (the call's invocation or acknowledgement), None for what
    # only the final state shows: a fault's row counts those in its window, and the others.
    times: list[tuple[str, float | None]] = field(default_factory=list)
    answers: Counter = field(default_factory=Counter)
    faults: list[dict] = field(default_factory=list)
    stats: dict[str, int | float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def add(self, invariant: str, message: str, at: float | None = None) -> None:
        self.violations[invariant].append(message)
        self.times.append((invariant, at))

    def violated_between(self, start: float, end: float) -> list[str]:
        """The invariants broken by a call in [start, end], or by the final state."""
        return sorted({name for name, at in self.times if at is None or start <= at <= end})


class Checker:
    def __init__(self, history: list[dict], final: dict[str, dict], gap_limit: float = GAP_LIMIT) -> None:
        self.calls = [record for record in history if record.get("op") != "fault"]
        self.faults = [record for record in history if record.get("op") == "fault"]
        self.final = final
        self.gap_limit = gap_limit
        self.report = Report()
        self.writes: dict[str, Write] = {}  # by content
        self.revoked_at: dict[str, float] = {}  # token -> completion of its acknowledged revocation

    # ------------------------------------------------------------------ the writes ---
    def collect_writes(self) -> None:
        for call in self.calls:
            if call["op"] not in WRITES:
                continue
            entry_input = call["args"]["entry"]
            write = self.writes.get(entry_input["content"])
            if write is None:
                write = Write(call["op"], entry_input["content"], state_of_input(entry_input))
                self.writes[write.content] = write
                if call["op"] == "save":
                    write.request_id, write.revision = call["args"]["requestId"], 1
                else:
                    write.entry_id, write.revision = call["args"]["id"], call["args"]["expectedRevision"] + 1
            write.first_invoked = min(write.first_invoked, call["invoked"])
            if call["answer"] == "ok":
                write.possible = True
                entry = call["entry"]
                if write.acknowledged_at is None or call["completed"] < write.acknowledged_at:
                    write.acknowledged_at = call["completed"]
                if write.kind == "save":
                    if write.entry_id not in (None, entry["id"]):
                        self.report.add(
                            "duplicates",
                            f"save {write.request_id} acknowledged with entry {write.entry_id} and with {entry['id']}",
                            call["completed"],
                        )
                    write.entry_id = entry["id"]
                elif entry["revision"] != write.revision or entry["content"] != write.content:
                    self.report.add(
                        "double_applied",
                        f"update of {write.entry_id} from revision {write.revision - 1} answered revision "
                        f"{entry['revision']}",
                        call["completed"],
                    )
            elif indeterminate(call["answer"]):
                write.possible = True

    # ----------------------------------------------------------------- the answers ---
    def check_answers(self) -> None:
        revoking: dict[str, float] = {}  # token -> when its first revocation was invoked
        for call in self.calls:
            if call["op"] == "revoke":
                token = call["token"]
                revoking[token] = min(revoking.get(token, float("inf")), call["invoked"])
                if call["answer"] == "ok":
                    self.revoked_at[token] = min(self.revoked_at.get(token, float("inf")), call["completed"])
        for call in self.calls:
            answer = call["answer"]
            self.report.answers[f"{call['op']} {answer}"] += 1
            if answer == "ok" or answer in INDETERMINATE:
                continue
            if answer == "conflict" and call["op"] == "update":
                continue
            # Refused for its token: once a revocation of it had been asked for, not before.
            if answer in ("401", "unauthenticated") and call["completed"] >= revoking.get(
                call.get("token"), float("inf")
            ):
                continue
            self.report.add(
                "unexpected_answers",
                f"{call['op']} by {call.get('process')} at {call['invoked']:.3f}: {answer} "
                f"after {call['completed'] - call['invoked']:.1f} s",
                call["invoked"],
            )

    def check_revoked_token(self) -> None:
        for call in self.calls:
            revoked = self.revoked_at.get(call.get("token"))
            if call["op"] != "revoke" and revoked is not None and call["invoked"] > revoked and call["answer"] == "ok":
                self.report.add(
                    "revoked_token",
                    f"{call['op']} with token {call['token']} invoked {call['invoked'] - revoked:.3f} s after its "
                    f"revocation was acknowledged succeeded",
                    call["invoked"],
                )

    # ------------------------------------------------------------------- the reads ---
    def written_state(self, entry_id: str, revision: int, content: str, before: float) -> Write | None:
        """The write that made this state, if one could have (invoked by ``before``)."""
        write = self.writes.get(content)
        if write is None or not write.possible or write.first_invoked > before or write.revision != revision:
            return None
        if write.entry_id is None and write.kind == "save":
            write.entry_id = entry_id  # an indeterminate save's entry, first seen here
        return write if write.entry_id == entry_id else None

    def check_reads(self) -> None:
        self.by_excerpt: dict[str, list[Write]] = defaultdict(list)
        for write in self.writes.values():
            self.by_excerpt[write.content[:EXCERPT_CHARS]].append(write)
        acknowledged: dict[str, list[tuple[float, int]]] = defaultdict(list)  # entry -> (ack time, revision)
        for write in self.writes.values():
            if write.acknowledged_at is not None and write.entry_id is not None:
                acknowledged[write.entry_id].append((write.acknowledged_at, write.revision))
        for call in self.calls:
            if call["op"] not in READS or call["answer"] != "ok":
                continue
            shown = [call["entry"]] if call["op"] == "get" else call.get("entries", [])
            for entry in shown:
                where = f"{call['op']} by {call.get('process')} at {call['invoked']:.3f}"
                content = entry.get("content")
                if content is None:  # a summary: find the write by its excerpt
                    candidates = [
                        w for w in self.by_excerpt.get(entry.get("excerpt"), []) if summary_matches(entry, w.state)
                    ]
                    write = next(
                        (
                            w
                            for w in candidates
                            if self.written_state(entry["id"], entry["revision"], w.content, call["completed"])
                        ),
                        None,
                    )
                else:
                    write = self.written_state(entry["id"], entry["revision"], content, call["completed"])
                    if write is not None and state_of_entry(entry) != write.state:
                        write = None
                if write is None:
                    self.report.add(
                        "phantom_reads",
                        f"{where}: {entry['id']} revision {entry['revision']} was never written",
                        call["invoked"],
                    )
                newest = max(
                    (revision for at, revision in acknowledged.get(entry["id"], []) if at < call["invoked"]), default=0
                )
                if entry["revision"] < newest:
                    self.report.add(
                        "phantom_reads",
                        f"{where}: {entry['id']} at revision {entry['revision']}, after revision {newest} was "
                        "acknowledged (a stale read)",
                        call["invoked"],
                    )

    # -------------------------------------------------------------- the final state ---
    def check_final(self) -> None:
        states = {}
        for node, state in self.final.items():
            states[node] = self.node_state(node, state)
        first = next(iter(states.values()), None)
        for node, state in states.items():
            if state != first:
                self.report.add("divergent_nodes", f"{node} differs from {next(iter(states))}: {diff(first, state)}")
        self.report.stats["entries"] = len(first["entries"]) if first else 0
        self.report.stats["revisions"] = len(first["revisions"]) if first else 0

    def node_state(self, node: str, state: dict) -> dict:
        entries = {e["id"]: e for e in state["entries"]}
        revisions = {(r["id"], r["revision"]): r for r in state["revisions"]}
        keys = Counter(k["entry"] for k in state["request_keys"])
        request_ids = Counter(k["request_id"] for k in state["request_keys"])
        # Lost: every acknowledged write, on this node.
        for write in self.writes.values():
            if write.acknowledged_at is None:
                continue
            if write.kind == "save":
                if write.entry_id not in entries:
                    self.report.add(
                        "lost",
                        f"{node}: save {write.request_id} (entry {write.entry_id}) is missing",
                        write.acknowledged_at,
                    )
                    continue
                first = revisions.get((write.entry_id, 1))
                if first is None or first["content"] != write.content:
                    self.report.add(
                        "lost",
                        f"{node}: entry {write.entry_id}'s revision 1 is not save {write.request_id}'s",
                        write.acknowledged_at,
                    )
            else:
                held = revisions.get((write.entry_id, write.revision))
                if held is None or held["content"] != write.content:
                    self.report.add(
                        "lost",
                        f"{node}: the update of {write.entry_id} to revision {write.revision} is missing",
                        write.acknowledged_at,
                    )
        # Duplicates: one entry per request id, one request key per entry.
        for entry_id in entries:
            if keys[entry_id] != 1:
                self.report.add("duplicates", f"{node}: entry {entry_id} has {keys[entry_id]} request keys")
        for request_id, count in request_ids.items():
            if count > 1:
                self.report.add("duplicates", f"{node}: request id {request_id} names {count} entries")
        by_content = Counter(r["content"] for (_, number), r in revisions.items() if number == 1)
        for content, count in by_content.items():
            if count > 1:
                self.report.add("duplicates", f"{node}: {count} entries were made by the save of {content[:60]!r}")
        # Double-applied: one revision per write, one chain per entry.
        contents = Counter(r["content"] for r in revisions.values())
        for content, count in contents.items():
            if count > 1 and content in self.writes:
                self.report.add(
                    "double_applied",
                    f"{node}: the write of {content[:60]!r} is in {count} revisions",
                    self.writes[content].first_invoked,
                )
        chains: dict[str, list[int]] = defaultdict(list)
        for entry_id, number in revisions:
            chains[entry_id].append(number)
        for entry_id, entry in entries.items():
            numbers = sorted(chains.get(entry_id, []))
            if numbers != list(range(1, entry["revision"] + 1)):
                self.report.add(
                    "double_applied",
                    f"{node}: entry {entry_id} at revision {entry['revision']} has revisions {compact(numbers)}",
                )
            current = revisions.get((entry_id, entry["revision"]))
            if current is not None and state_of_entry(current) != state_of_entry(entry):
                self.report.add("double_applied", f"{node}: entry {entry_id} is not its revision {entry['revision']}")
        # Phantom writes: every revision was written by a call.
        for (entry_id, number), revision in revisions.items():
            write = self.writes.get(revision["content"])
            if write is None or not write.possible or write.revision != number:
                self.report.add("phantom_reads", f"{node}: {entry_id} revision {number} was written by no call")
            elif write.entry_id is None:
                write.entry_id = entry_id
            elif write.entry_id != entry_id:
                self.report.add("phantom_reads", f"{node}: {entry_id} revision {number} holds another entry's write")
        return {
            "entries": sorted(
                (e["id"], e["revision"], json.dumps(state_of_entry(e), sort_keys=True)) for e in entries.values()
            ),
            "revisions": sorted(
                (i, n, json.dumps(state_of_entry(r), sort_keys=True)) for (i, n), r in revisions.items()
            ),
            "request_keys": sorted((k["request_id"], k["entry"]) for k in state["request_keys"]),
        }

    # ------------------------------------------------------------------- the faults ---
    def check_faults(self) -> None:
        acks = sorted(call["completed"] for call in self.calls if call["op"] in WRITES and call["answer"] == "ok")
        for fault in self.faults:
            start, end = fault["start"], fault["end"]
            heal = fault.get("heal")
            limit = fault.get("gap_limit", self.gap_limit)
            before = [t for t in acks if t <= start]
            during = [t for t in acks if start < t <= end]
            points = before[-1:] + during
            if not points:
                longest, gap_from, gap_to = end - start, start, end
            else:
                gaps = [(b - a, a, b) for a, b in itertools.pairwise(points)]
                gaps.append((end - points[-1], points[-1], end))
                if not before:
                    gaps.append((points[0] - start, start, points[0]))
                longest, gap_from, gap_to = max(gaps)
            row = {
                "name": fault["name"],
                "start": start,
                "end": end,
                "longest_without_ack": round(longest, 2),
                "gap": (round(gap_from - start, 2), round(gap_to - start, 2)),
                "answers": dict(
                    Counter(
                        f"{call['op']} {call['answer']}"
                        for call in self.calls
                        if call["op"] in WRITES + READS and start <= call["completed"] <= end
                    )
                ),
                "slowest_refusal": round(
                    max(
                        (
                            call["completed"] - call["invoked"]
                            for call in self.calls
                            if start <= call["completed"] <= end and call["answer"] != "ok"
                        ),
                        default=0.0,
                    ),
                    2,
                ),
            }
            if heal is not None:
                resumed = next((t for t in acks if t > heal), None)
                row["resumed_after_heal"] = None if resumed is None else round(resumed - heal, 2)
                if resumed is None or resumed - heal > limit:
                    self.report.add(
                        "write_gaps",
                        f"{fault['name']}: writes did not resume within {limit:.0f} s of the heal",
                        heal,
                    )
                # Before the heal writes may be refused for as long as the fault lasts (the etcd
                # majority lost): only the time after it counts.
            elif longest > limit:
                self.report.add(
                    "write_gaps",
                    f"{fault['name']}: {longest:.1f} s without an acknowledged write (limit {limit:.0f} s)",
                    gap_from,
                )
            self.report.faults.append(row)

    def run(self) -> Report:
        self.collect_writes()
        self.check_answers()
        self.check_revoked_token()
        self.check_final()  # before the reads: it names the entries of indeterminate saves
        self.check_reads()
        self.check_faults()
        self.report.stats.update(
            calls=len(self.calls),
            saves_acknowledged=sum(w.kind == "save" and w.acknowledged_at is not None for w in self.writes.values()),
            updates_acknowledged=sum(
                w.kind == "update" and w.acknowledged_at is not None for w in self.writes.values()
            ),
            writes_indeterminate=sum(w.possible and w.acknowledged_at is None for w in self.writes.values()),
            indeterminate_applied=sum(
                w.possible and w.acknowledged_at is None and w.entry_id is not None for w in self.writes.values()
            ),
        )
        return self.report


def compact(numbers: list[int]) -> str:
    return ",".join(map(str, numbers[:10])) + ("..." if len(numbers) > 10 else "")


def diff(first: dict, other: dict) -> str:
    parts = []
    for name in ("entries", "revisions", "request_keys"):
        missing, extra = set(first[name]) - set(other[name]), set(other[name]) - set(first[name])
        if missing or extra:
            parts.append(f"{name}: {len(missing)} missing, {len(extra)} more")
    return "; ".join(parts)


def check(history: Iterable[dict], final: dict[str, dict], gap_limit: float = GAP_LIMIT) -> Report:
    return Checker(list(history), final, gap_limit).run()


def render(report: Report) -> str:
    lines = []
    for name in INVARIANTS:
        found = report.violations[name]
        lines.append(f"{'PASS' if not found else 'FAIL'}  {name}: {len(found)}")
        lines += [f"      {message}" for message in found[:5]]
        if len(found) > 5:
            lines.append(f"      ... and {len(found) - 5} more")
    lines.append("stats: " + ", ".join(f"{k} {v}" for k, v in report.stats.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a try_network.sh history against its final state.")
    parser.add_argument("history")
    parser.add_argument("final")
    parser.add_argument("--gap-limit", type=float, default=GAP_LIMIT)
    args = parser.parse_args(argv)
    with open(args.history) as lines:
        history = [json.loads(line) for line in lines if line.strip()]
    with open(args.final) as file:
        final = json.load(file)
    report = check(history, final, args.gap_limit)
    print(render(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
