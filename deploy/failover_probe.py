"""Load, failovers and checks for deploy/try_failover.sh (run by it, on 127.0.0.1 only).

Writers save and update notes through both workers over MCP (JSON-RPC ``tools/call`` over
Streamable HTTP, as any client sends it), a reader gets them back, and /healthz is polled
on both workers every 50 ms. Meanwhile the primary's postmaster is killed (SIGKILL) three
times, each time on the new primary; then a whole node is lost (its Patroni and its
postmaster killed, so its leader lock must expire) and started again; then Patroni
switches over once on request.

A write counts as **acknowledged** only when its call answered success. A save that was
refused (``unavailable``, HTTP 503) is retried with the same ``requestId``, which makes the
retry safe whether or not the first try committed. An update that was refused is retried
with the same ``expectedRevision``; if the retry gets ``conflict``, the refused try may have
committed with its answer lost, so the writer reads the entry back: if it holds the
update's revision and content, the update took effect (counted as "applied, answer lost",
never as acknowledged); anything else is a failed check. Every loop and wait is bounded.

Two helper modes for the shell script: ``--cluster-ready`` (exit 0 once Patroni reports a
leader and two replicas, one synchronous) and ``--leader-port``.
"""

import argparse
import itertools
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

WRITERS = 4
# Idle pooled connections are dropped after this, before uvicorn closes them (its keep-alive
# is 5 s): otherwise a request sent as the server closes the connection gets no answer.
CLIENT_KEEPALIVE = 2.0
CALL_TIMEOUT = 30.0  # the client's timeout: no call may take longer
HEALTH_INTERVAL = 0.05
RETRY_PAUSE = 0.1
RECOVERY_LIMIT = 30.0  # the bound: writes refused for at most this long per failover
WAIT_LIMIT = 120.0  # for the cluster to become whole again after a failover
LOAD_BETWEEN = 4.0  # seconds of load between a rejoin and the next failover
ALLOWED = {"ok", "unavailable", "503"}


# ---------------------------------------------------------------- Patroni ---
def get_json(url: str, timeout: float = 2.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def cluster(apis: list[str]) -> dict | None:
    """Patroni's view of the cluster (GET /cluster), from the first node that answers."""
    for api in apis:
        try:
            return get_json(api + "/cluster")
        except (OSError, ValueError):
            continue
    return None


def leader(state: dict | None) -> dict | None:
    for member in (state or {}).get("members", []):
        if member.get("role") in ("leader", "master", "primary") and member.get("state") == "running":
            return member
    return None


def whole(state: dict | None) -> bool:
    """A running leader, a synchronous standby and one more replica, all streaming, none lagging."""
    if leader(state) is None:
        return False
    roles = sorted(m.get("role", "") for m in state["members"] if m.get("role") not in ("leader", "master", "primary"))
    if roles != ["replica", "sync_standby"]:
        return False
    for member in state["members"]:
        if member.get("state") not in ("running", "streaming"):
            return False
        lag = member.get("lag", 0) if member is not leader(state) else 0
        if not isinstance(lag, int) or lag > 1024 * 1024:
            return False
    return True


# ------------------------------------------------------------------- MCP ---
def http_client() -> httpx2.Client:
    return httpx2.Client(limits=httpx2.Limits(keepalive_expiry=CLIENT_KEEPALIVE))


@dataclass
class Answer:
    kind: str  # ok | unavailable | 503 | conflict | not_found | other codes | http NNN | no answer
    started: float
    ended: float
    result: dict | None = None  # the structured content of a success

    @property
    def entry(self) -> dict:
        return self.result["entry"]


def call_tool(client: httpx2.Client, worker: str, token: str, name: str, arguments: dict) -> Answer:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    started = time.monotonic()
    try:
        response = client.post(worker + "/mcp", json=body, headers=headers, timeout=CALL_TIMEOUT)
    except httpx2.TransportError as error:
        return Answer(f"no answer ({type(error).__name__})", started, time.monotonic())
    ended = time.monotonic()
    if response.status_code == 503:
        return Answer("503", started, ended)
    if response.status_code != 200:
        return Answer(f"http {response.status_code}", started, ended)
    try:
        result = response.json()["result"]
        if not result.get("isError"):
            return Answer("ok", started, ended, result["structuredContent"])
        return Answer(json.loads(result["content"][0]["text"])["error"]["code"], started, ended)
    except (ValueError, KeyError, IndexError, TypeError):
        return Answer("malformed answer", started, ended)


# ------------------------------------------------------------ the record ---
@dataclass
class Known:
    """What the writers know of one entry: its last acknowledged (or verified) state."""

    request_id: str
    revision: int
    content: str
    acknowledged_revisions: dict[int, str] = field(default_factory=dict)


class Record:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Answer]] = []  # (operation, answer)
        self.entries: dict[str, Known] = {}
        self.health: list[tuple[float, str, str]] = []  # (time, worker, status)
        self.bad: list[str] = []  # failed checks seen during the run
        self.saves_acknowledged = 0
        self.updates_acknowledged = 0
        self.saves_retried = 0
        self.updates_applied_answer_lost = 0
        self.stale_reads = 0

    def call(self, operation: str, answer: Answer) -> None:
        with self.lock:
            self.calls.append((operation, answer))
            if answer.kind not in ALLOWED and not (operation == "update" and answer.kind == "conflict"):
                self.bad.append(f"{operation}: {answer.kind}")


class Writer(threading.Thread):
    def __init__(self, number: int, workers: list[str], token: str, record: Record, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{number}", daemon=True)
        self.number, self.workers, self.token, self.record, self.stop = number, workers, token, record, stop
        self.client = http_client()
        self.turn = number
        self.count = 0
        self.mine: list[str] = []

    def call(self, operation: str, name: str, arguments: dict) -> Answer:
        self.turn += 1
        answer = call_tool(self.client, self.workers[self.turn % len(self.workers)], self.token, name, arguments)
        self.record.call(operation, answer)
        return answer

    def run(self) -> None:
        while not self.stop.is_set():
            self.count += 1
            if len(self.mine) < 3 or random.random() < 0.4:
                self.save()
            else:
                self.update(random.choice(self.mine))
            time.sleep(0.02)

    def save(self) -> None:
        request_id = f"w{self.number}-s{self.count}"
        content = f"save {request_id} {uuid.uuid4()}"
        arguments = {"requestId": request_id, "entry": {"content": content, "tags": [f"writer-{self.number}"]}}
        deadline = time.monotonic() + 2 * WAIT_LIMIT
        tries = 0
        while time.monotonic() < deadline:
            tries += 1
            answer = self.call("save", "field_notes_save", arguments)
            if answer.kind == "ok":
                entry = answer.entry
                with self.record.lock:
                    known = self.record.entries.setdefault(
                        entry["id"], Known(request_id, entry["revision"], entry["content"])
                    )
                    known.acknowledged_revisions[entry["revision"]] = entry["content"]
                    self.record.saves_acknowledged += 1
                    self.record.saves_retried += tries > 1
                if entry["content"] != content:
                    self.record.bad.append(f"save {request_id} answered another entry's content")
                self.mine.append(entry["id"])
                return
            time.sleep(RETRY_PAUSE)
        self.record.bad.append(f"save {request_id} never acknowledged")

    def update(self, entry_id: str) -> None:
        with self.record.lock:
            expected = self.record.entries[entry_id].revision
        content = f"update {self.number}-{self.count} {uuid.uuid4()}"
        arguments = {"id": entry_id, "expectedRevision": expected, "entry": {"content": content}}
        deadline = time.monotonic() + 2 * WAIT_LIMIT
        refused = False
        while time.monotonic() < deadline:
            answer = self.call("update", "field_notes_update", arguments)
            if answer.kind == "ok":
                with self.record.lock:
                    known = self.record.entries[entry_id]
                    known.revision, known.content = answer.entry["revision"], answer.entry["content"]
                    known.acknowledged_revisions[known.revision] = known.content
                    self.record.updates_acknowledged += 1
                if answer.entry["revision"] != expected + 1:
                    self.record.bad.append(f"update of {entry_id} made revision {answer.entry['revision']}")
                return
            if answer.kind == "conflict":
                if not refused:
                    self.record.bad.append(f"update of {entry_id}: conflict on the first try (only I write it)")
                    return
                self.verify_lost_answer(entry_id, expected, content)
                return
            refused = True
            time.sleep(RETRY_PAUSE)
        self.record.bad.append(f"update of {entry_id} never answered")

    def verify_lost_answer(self, entry_id: str, expected: int, content: str) -> None:
        """A refused try committed and its answer was lost: the entry must hold exactly it."""
        deadline = time.monotonic() + WAIT_LIMIT
        while time.monotonic() < deadline:
            answer = self.call("get", "field_notes_get", {"id": entry_id})
            if answer.kind == "ok":
                entry = answer.entry
                if entry["revision"] == expected + 1 and entry["content"] == content:
                    with self.record.lock:
                        known = self.record.entries[entry_id]
                        known.revision, known.content = entry["revision"], entry["content"]
                        self.record.updates_applied_answer_lost += 1
                else:
                    self.record.bad.append(
                        f"update of {entry_id}: conflict, but revision {entry['revision']} is not the update's"
                    )
                return
            time.sleep(RETRY_PAUSE)
        self.record.bad.append(f"update of {entry_id}: could not read it back")


class Reader(threading.Thread):
    """Gets entries back: an acknowledged revision must be visible at once (read your writes)."""

    def __init__(self, workers: list[str], token: str, record: Record, stop: threading.Event) -> None:
        super().__init__(name="reader", daemon=True)
        self.workers, self.token, self.record, self.stop = workers, token, record, stop
        self.client = http_client()

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            with self.record.lock:
                ids = list(self.record.entries)
            if not ids:
                time.sleep(0.05)
                continue
            entry_id = random.choice(ids)
            with self.record.lock:
                acknowledged = max(self.record.entries[entry_id].acknowledged_revisions)
            turn += 1
            answer = call_tool(self.client, self.workers[turn % 2], self.token, "field_notes_get", {"id": entry_id})
            self.record.call("get", answer)
            if answer.kind == "ok" and answer.entry["revision"] < acknowledged:
                with self.record.lock:
                    self.record.stale_reads += 1
            time.sleep(0.02)


class HealthPoller(threading.Thread):
    def __init__(self, worker: str, record: Record, stop: threading.Event) -> None:
        super().__init__(name=f"health {worker}", daemon=True)
        self.worker, self.record, self.stop = worker, record, stop

    def run(self) -> None:
        with http_client() as client:
            while not self.stop.is_set():
                try:
                    status = str(client.get(self.worker + "/healthz", timeout=CALL_TIMEOUT).status_code)
                except httpx2.TransportError as error:
                    status = f"no answer ({type(error).__name__})"
                with self.record.lock:
                    self.record.health.append((time.monotonic(), self.worker, status))
                time.sleep(HEALTH_INTERVAL)


# --------------------------------------------------------------- a switch ---
@dataclass
class Switch:
    what: str
    old: str
    new: str = "?"
    at: float = 0.0
    primary_up: float | None = None  # a read-write connection to the cluster succeeds again
    first_calls: list[str] = field(default_factory=list)  # one get per worker right then
    whole_again: float | None = None  # old primary back as a streaming replica


def primary_accepts(database_url: str) -> bool:
    try:
        with psycopg.connect(database_url, connect_timeout=2) as connection:
            connection.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def follow(
    switch: Switch, apis, database_url, workers, token, record: Record, on_primary_up: Callable[[], None] | None
) -> None:
    """Wait (bounded) for the new primary, then for the old one to rejoin as a replica."""
    deadline = switch.at + WAIT_LIMIT
    with http_client() as client:
        while time.monotonic() < deadline and switch.primary_up is None:
            if primary_accepts(database_url):
                switch.primary_up = time.monotonic()
                with record.lock:
                    some_id = next(iter(record.entries))
                # The first call through each worker once the primary is up must succeed.
                for worker in workers:
                    answer = call_tool(client, worker, token, "field_notes_get", {"id": some_id})
                    record.call("get", answer)
                    switch.first_calls.append(answer.kind)
                if on_primary_up is not None:
                    on_primary_up()
            else:
                time.sleep(0.05)
    while time.monotonic() < deadline:
        state = cluster(apis)
        if whole(state) and leader(state)["name"] != switch.old:
            switch.new = leader(state)["name"]
            switch.whole_again = time.monotonic()
            return
        time.sleep(0.2)


def healthy(worker: str) -> bool:
    try:
        return httpx2.get(worker + "/healthz", timeout=5).status_code == 200
    except httpx2.TransportError:
        return False


def patroni_pid(pid: int) -> int:
    """Patroni's own pid: the script starts it through runuser when run as root."""
    if Path(f"/proc/{pid}/comm").read_text().strip() == "runuser":
        return int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
    return pid


def restart_node(command: str, name: str, node_dir: Path) -> None:
    """Start a node's Patroni again, in its own session; its pid goes where the shell script's
    clean-up finds it."""
    with open(node_dir / "patroni-restarted.log", "ab") as log:
        process = subprocess.Popen(
            shlex.split(command.format(name=name)),
            cwd=node_dir.parent,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (node_dir / "patroni-restarted.pid").write_text(f"{process.pid}\n")
    print(f"failover_probe: started Patroni on {name} again (pid {process.pid})", flush=True)


def postmaster_pid(data_dir: str) -> int:
    return int(Path(data_dir, "postmaster.pid").read_text().splitlines()[0])


# ------------------------------------------------------------ the checks ---
def browse_all(client: httpx2.Client, worker: str, token: str) -> list[dict]:
    entries: list[dict] = []
    cursor = None
    for _page in range(10_000):
        arguments = {"limit": 50, **({"cursor": cursor} if cursor else {})}
        answer = call_tool(client, worker, token, "field_notes_search", arguments)
        if answer.kind != "ok":
            raise SystemExit(f"failover_probe: browsing the codex got {answer.kind}")
        page = answer.result
        entries += page["entries"]
        cursor = page.get("nextCursor")
        if not cursor:
            return entries
    raise SystemExit("failover_probe: search pages did not end")


def node_counts(database_url: str) -> list[tuple[str, int, int]]:
    """(node, entries, sum of revisions) on every node, read straight from each PostgreSQL."""
    params = conninfo_to_dict(database_url)
    hosts, ports = params["host"].split(","), params["port"].split(",")
    counts = []
    for host, port in zip(hosts, ports, strict=True):
        single = {**params, "host": host, "port": port, "target_session_attrs": "any"}
        with psycopg.connect(make_conninfo(**single)) as connection:
            entries, revisions = connection.execute(
                "SELECT count(*), coalesce(sum(revision), 0) FROM notebook_entry"
            ).fetchone()
        counts.append((f"{host}:{port}", entries, revisions))
    return counts


def write_gap(record: Record, switch: Switch, window_end: float) -> tuple[float, float]:
    """The longest time between two acknowledged writes around ``switch`` (the later one after
    it began): how long writes were refused or held. Each writer waits 20 ms between writes,
    so in normal running the gap is a few tens of milliseconds."""
    with record.lock:
        acks = sorted(
            a.ended
            for op, a in record.calls
            if op in ("save", "update") and a.kind == "ok" and switch.at - 5 <= a.ended <= window_end
        )
    gaps = [(later - earlier, earlier, later) for earlier, later in itertools.pairwise(acks) if later > switch.at]
    if not gaps:
        return switch.at, window_end
    _, start, end = max(gaps)
    return start, end


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def start_switch(what: str, state: dict, nodes: dict, args) -> tuple[Switch, Callable[[], None] | None]:
    """Take the primary away (or ask Patroni to move it); what to do once a new one is up."""
    old = leader(state)["name"]
    if what.startswith("kill"):
        pid = postmaster_pid(nodes[old][1])
        switch = Switch(what, old, at=time.monotonic())
        os.kill(pid, signal.SIGKILL)
        print(f"failover_probe: {what}: killed the postmaster of {old} (pid {pid})", flush=True)
        return switch, None
    if what == "node lost":
        # The whole node at once: Patroni first, so that nothing on it can react, then its
        # postmaster. Its leader lock now has to expire (ttl) before a standby may take
        # over. Once the new primary is up, the node's Patroni is started again, as a host
        # coming back would; it rejoins as a replica.
        patroni, postmaster = patroni_pid(nodes[old][2]), postmaster_pid(nodes[old][1])
        switch = Switch(what, old, at=time.monotonic())
        os.kill(patroni, signal.SIGKILL)
        os.kill(postmaster, signal.SIGKILL)
        print(f"failover_probe: {what}: killed Patroni (pid {patroni}) and the postmaster of {old}", flush=True)
        return switch, lambda: restart_node(args.restart_node, old, Path(nodes[old][1]).parent)
    candidate = next(m["name"] for m in state["members"] if m["role"] == "sync_standby")
    switch = Switch(what, old, at=time.monotonic())
    command = [*shlex.split(args.patronictl), "switchover", "--leader", old, "--candidate", candidate, "--force"]
    print(f"failover_probe: {what}: {shlex.join(command)}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_LIMIT)
    lines = (done.stdout + done.stderr).strip().splitlines() or ["(no output)"]
    print(next((line for line in lines if "witched over" in line), lines[0]), flush=True)
    return switch, None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patroni", action="append", default=[])
    parser.add_argument("--cluster-ready", action="store_true")
    parser.add_argument("--leader-port", action="store_true")
    parser.add_argument("--worker", action="append", default=[])
    parser.add_argument("--worker-pids", default="")
    parser.add_argument("--node", action="append", default=[], help="name=REST URL,data directory,Patroni's pid")
    parser.add_argument("--restart-node", default="", help="command that starts a node's Patroni again; {name}")
    parser.add_argument("--patronictl", default="patronictl")
    args = parser.parse_args()
    if args.cluster_ready:
        return 0 if whole(cluster(args.patroni)) else 1
    if args.leader_port:
        print(leader(cluster(args.patroni))["port"])
        return 0

    token = os.environ["FAILOVER_TOKEN"]
    database_url = os.environ["DATABASE_URL"]
    nodes = {}
    for spec in args.node:
        name, _, rest = spec.partition("=")
        api, data_dir, pid = rest.split(",")
        nodes[name] = (api, data_dir, int(pid))
    apis = [api for api, _, _ in nodes.values()]
    worker_pids = [int(pid) for pid in args.worker_pids.split(",")]
    started_at = {pid: Path(f"/proc/{pid}/stat").read_text().split()[21] for pid in worker_pids}

    deadline = time.monotonic() + 60
    while not all(healthy(worker) for worker in args.worker):
        if time.monotonic() > deadline:
            print("failover_probe: the workers did not come up", file=sys.stderr)
            return 1
        time.sleep(0.3)

    record = Record()
    stop = threading.Event()
    threads: list[threading.Thread] = [Writer(n, args.worker, token, record, stop) for n in range(WRITERS)]
    threads += [Reader(args.worker, token, record, stop)] + [HealthPoller(w, record, stop) for w in args.worker]
    for thread in threads:
        thread.start()
    time.sleep(LOAD_BETWEEN)

    switches: list[Switch] = []
    for what in ["kill -9 #1", "kill -9 #2", "kill -9 #3", "node lost", "switchover"]:
        switch, on_primary_up = start_switch(what, cluster(apis), nodes, args)
        follow(switch, apis, database_url, args.worker, token, record, on_primary_up)
        switches.append(switch)
        print(
            f"failover_probe: {switch.what}: {switch.old} -> {switch.new}; primary up after "
            f"{seconds(switch.primary_up and switch.primary_up - switch.at)}; whole again after "
            f"{seconds(switch.whole_again and switch.whole_again - switch.at)}",
            flush=True,
        )
        if switch.whole_again is None:
            break
        time.sleep(LOAD_BETWEEN)

    stop.set()
    stopped = time.monotonic()
    for thread in threads:
        thread.join(timeout=2 * WAIT_LIMIT)
    return report(record, switches, stopped, args, token, database_url, worker_pids, started_at)


def report(record, switches, stopped, args, token, database_url, worker_pids, started_at) -> int:
    with http_client() as client:
        found = browse_all(client, args.worker[0], token)
        final: dict[str, dict] = {}
        for entry_id in record.entries:
            for _try in range(100):
                answer = call_tool(client, args.worker[1], token, "field_notes_get", {"id": entry_id})
                if answer.kind == "ok":
                    final[entry_id] = answer.entry
                    break
                time.sleep(RETRY_PAUSE)

    lost = []
    for entry_id, known in record.entries.items():
        entry = final.get(entry_id)
        if entry is None:
            lost.append(f"{entry_id}: saved, acknowledged, not found")
            continue
        last_acknowledged = max(known.acknowledged_revisions)
        if entry["revision"] < last_acknowledged:
            lost.append(f"{entry_id}: revision {last_acknowledged} acknowledged, {entry['revision']} found")
        elif (entry["revision"], entry["content"]) != (known.revision, known.content):
            lost.append(f"{entry_id}: holds revision {entry['revision']}, the writers know {known.revision}")
    by_request: dict[str, int] = {}
    for entry in found:
        if entry["excerpt"].startswith("save "):
            request_id = entry["excerpt"].split()[1]
        else:  # updated since: the writers know which save made it
            request_id = record.entries[entry["id"]].request_id if entry["id"] in record.entries else entry["id"]
        by_request[request_id] = by_request.get(request_id, 0) + 1
    duplicates = sum(count - 1 for count in by_request.values())
    unknown = [entry["id"] for entry in found if entry["id"] not in record.entries]

    deadline = time.monotonic() + 30
    while True:
        counts = node_counts(database_url)
        if len({(n, r) for _, n, r in counts}) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    kinds: dict[str, int] = {}
    for operation, answer in record.calls:
        key = f"{operation} {answer.kind}"
        kinds[key] = kinds.get(key, 0) + 1

    rows = []
    checks: list[tuple[str, bool, str]] = []
    for number, switch in enumerate(switches):
        window_end = switches[number + 1].at if number + 1 < len(switches) else stopped
        gap_start, gap_end = write_gap(record, switch, window_end)
        refused = [
            a
            for op, a in record.calls
            if op in ("save", "update") and a.kind in ("unavailable", "503") and gap_start <= a.ended <= gap_end
        ]
        health = [(t, w, s) for t, w, s in record.health if gap_start <= t <= gap_end]
        health_after = [(t, w, s) for t, w, s in record.health if gap_end + 2 <= t <= min(gap_end + 10, window_end)]
        saw_503 = {w: sum(s == "503" for _, ww, s in health if ww == w) for w in args.worker}
        ok_after = {
            w: all(s == "200" for _, ww, s in health_after if ww == w) and any(ww == w for _, ww, _ in health_after)
            for w in args.worker
        }
        rows.append(
            (
                switch.what,
                f"{switch.old} -> {switch.new}",
                seconds(switch.primary_up and switch.primary_up - switch.at),
                seconds(gap_end - gap_start),
                f"{len(refused)}",
                "/".join(str(saw_503[w]) for w in args.worker),
                "/".join(switch.first_calls) or "-",
                seconds(switch.whole_again and switch.whole_again - switch.at),
            )
        )
        checks += [
            (
                f"{switch.what}: longest time without an acknowledged write at most {RECOVERY_LIMIT:.0f} s",
                gap_end - gap_start <= RECOVERY_LIMIT,
                seconds(gap_end - gap_start),
            ),
            (
                f"{switch.what}: first call through each worker once the primary is up succeeds",
                switch.first_calls == ["ok"] * len(args.worker),
                ",".join(switch.first_calls),
            ),
            (
                f"{switch.what}: /healthz 200 from 2 s after the gap (each worker)",
                all(ok_after.values()),
                str(ok_after),
            ),
            (
                f"{switch.what}: old primary back as a streaming replica",
                switch.whole_again is not None,
                seconds(switch.whole_again and switch.whole_again - switch.at),
            ),
        ]
        if switch.what != "switchover":
            checks.append(
                (
                    f"{switch.what}: /healthz answered 503 during the gap (each worker)",
                    all(saw_503.values()),
                    str(saw_503),
                )
            )

    last_health = {w: s for _, w, s in record.health}
    other = {k: v for k, v in kinds.items() if k.split(" ", 1)[1] not in ALLOWED and k != "update conflict"}
    restarted = [
        pid
        for pid in worker_pids
        if not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[21] != started_at[pid]
    ]
    checks += [
        ("acknowledged writes lost", not lost, f"{len(lost)} {lost[:3]}"),
        ("duplicate entries from retried saves", duplicates == 0, str(duplicates)),
        ("entries nobody saved", not unknown, str(len(unknown))),
        ("answers other than success, unavailable or 503", not other, str(other or 0)),
        ("stale reads (an acknowledged revision not yet visible)", record.stale_reads == 0, str(record.stale_reads)),
        ("failed checks during the run", not record.bad, f"{len(record.bad)} {record.bad[:3]}"),
        ("all three nodes hold the same entries and revisions", len({(n, r) for _, n, r in counts}) == 1, str(counts)),
        (
            "/healthz 200 on each worker at the end",
            all(last_health.get(w) == "200" for w in args.worker),
            str(last_health),
        ),
        ("workers never restarted", not restarted, str(restarted or "same pids")),
        (
            "three postmaster kills, a lost node and a switchover done",
            len(switches) == 5 and all(s.whole_again for s in switches),
            str(len(switches)),
        ),
    ]

    headers = (
        "switch",
        "primary",
        "new primary accepts connections",
        "longest without an acknowledged write",
        "write answers unavailable/503",
        "/healthz 503s (worker 1/2)",
        "first get per worker",
        "old primary streaming again",
    )
    widths = (
        [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)] if rows else [len(h) for h in headers]
    )
    print()
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print()
    print(
        f"writes: {record.saves_acknowledged} saves and {record.updates_acknowledged} updates acknowledged; "
        f"{record.saves_retried} saves acknowledged on a retry; {record.updates_applied_answer_lost} updates "
        f"applied with their answer lost (found by get, not counted as acknowledged); "
        f"{sum(op == 'get' for op, _ in record.calls)} gets"
    )
    print("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print()
    failed = 0
    for label, ok, detail in checks:
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {label}: {detail}")
    print()
    print(f"failover_probe: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
