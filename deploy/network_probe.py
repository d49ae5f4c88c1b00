"""Load, faults and measurements for deploy/try_network.sh, run by it on the client host of its
topology (a network namespace; every other host is reached through its relay).

**Faults**, each under one mixed load that runs throughout (``Load``): writers save notes
(a refused save is retried with the same ``requestId``, and some acknowledged saves are sent
again, which must return the same entry) and update their own; racers update a few shared
entries from the revision they just read (so several race on one ``expectedRevision``);
readers get and search; and a victim agent calls with a token of its own, which is revoked
midway through (``manage.py revoke_tokens`` on an application host). Every call goes through
the load balancer and is recorded (``history.jsonl``): invoked, completed, answer, arguments,
result. The faults, one after the other (``FAULTS``):

- the primary partitioned away from both replicas and the etcd majority, while the
  application hosts still reach it; meanwhile a direct ``INSERT`` on it must never succeed;
- an application host cut off from every database host, then healed;
- just after the partition's failover, with the old primary rewound and streaming again, the
  synchronous standby silent (blackholed: no reset), so Patroni must name the old primary
  within 20 s (issue 46; the fault makes its own failover when the one before did not leave
  that state);
- the synchronous replica cut off (its link down), so Patroni must pick the other one;
- the synchronous standby silent while the other replica restarts (its postmaster killed), so
  that no healthy candidate exists: writes wait or are refused, never past the client's
  timeout, and resume within 20 s;
- a flaky link between the application hosts and the primary for a minute (the primary's
  relay stalls chunks up to a few hundred milliseconds and varies the delay);
- one etcd member lost, then a second (the majority): writes stop, and must resume within
  30 s of the member's return;
- the primary's postmaster killed three times, then a whole node lost (Patroni and
  PostgreSQL killed, started again once a new primary is up).

Each fault first waits for the state it is about (the cluster whole, etcd healthy, the
failover's aftermath) and reads the roles it acts on from the cluster then; a state not reached
is a harness error that names it (the fault is not run; exit status 4, where a product failure
is 1). Afterwards the final state is read from every node, straight from PostgreSQL, and
deploy/history_check.py checks the history against it.

**Cost**: wrk (scripts/bench_mcp.lua) through the load balancer per tool, with two application
hosts and with one, with the relays' delay on and off, alternating; the round trips per call
are the relays' turns counted on the primary.
"""

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import failover_probe
import history_check
from failover_probe import leader, whole

CALL_TIMEOUT = failover_probe.CALL_TIMEOUT  # the client's timeout: a call that takes longer has no answer
CLIENT_KEEPALIVE = 2.0
PAUSE = 0.02  # between one client's calls
RETRY_PAUSE = 0.1
RETRY_LIMIT = 240.0  # a write is retried for at most this long
WAIT_LIMIT = 120.0  # for the cluster to become whole again
SYNC_GAP_LIMIT = 20.0  # the synchronous-standby faults: writes acknowledged again within this
HARNESS_ERROR = 4  # the exit status when a fault's precondition was not reached (a product failure: 1)
LOAD_BETWEEN = 4.0
REFUSED = ("unavailable", "503")
WRITERS, RACERS, READERS = 4, 3, 2
HOT_ENTRIES = 4
CODEX_USERS = ("network-probe", "network-victim")


def log(message: str) -> None:
    print(f"network_probe: {message}", flush=True)


# -------------------------------------------------------------- topology ---
class Topology:
    def __init__(self, path: str) -> None:
        self.data = json.loads(Path(path).read_text())
        self.work = Path(self.data["work"])
        self.hosts = self.data["hosts"]
        self.databases = self.data["databases"]

    def address(self, host: str) -> str:
        return self.hosts[host]["address"]

    def run_in(self, host: str, *argv: str, timeout: float = 15) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ip", "netns", "exec", self.hosts[host]["namespace"], *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start_in(self, host: str, name: str, argv: list[str], as_postgres: bool = True) -> int:
        """A process in ``host``'s namespace, in its own session; its pid joins the script's list."""
        prefix = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] if as_postgres else []
        with open(self.work / f"{name}.restarted.log", "ab") as output:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.hosts[host]["namespace"], *prefix, *argv],
                stdout=output,
                stderr=output,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        with open(self.data["pids"], "a") as pids:
            pids.write(f"{process.pid} {name}\n")
        return process.pid

    def pid(self, name: str) -> int | None:
        """The latest pid recorded under ``name``."""
        found = None
        for line in Path(self.data["pids"]).read_text().splitlines():
            pid, _, recorded = line.partition(" ")
            if recorded == name:
                found = int(pid)
        return found

    def rewinds(self, db: str) -> int:
        """How many times ``db``'s Patroni has rewound its PostgreSQL (pg_rewind) so far."""
        logs = [self.work / f"patroni-{db}.log", self.work / f"patroni-{db}.restarted.log"]
        return sum(path.read_text(errors="replace").count("pg_rewind exit code=0") for path in logs if path.exists())

    def relay(self, host: str, request: dict) -> dict:
        import socket

        with socket.socket(socket.AF_UNIX) as control:
            control.settimeout(10)
            control.connect(self.hosts[host]["relay"])
            control.sendall(json.dumps(request).encode() + b"\n")
            return json.loads(control.makefile().readline())

    def all_relays(self, request: dict) -> None:
        for host in self.hosts:
            if "relay" in self.hosts[host]:
                answer = self.relay(host, request)
                if not answer.get("ok"):
                    raise SystemExit(f"network_probe: the relay on {host} refused {request}: {answer}")

    def postgres(self, db: str, dbname: str = "codex", **options) -> psycopg.Connection:
        return psycopg.connect(
            host=self.address(db),
            port=5432,
            user="postgres",
            password=self.data["superuser_password"],
            dbname=dbname,
            connect_timeout=3,
            **options,
        )


# --------------------------------------------------------------- Patroni ---
def get_json(url: str, timeout: float = 2.0) -> dict | None:
    try:
        response = httpx2.get(url, timeout=timeout)
        return response.json()
    except (httpx2.HTTPError, ValueError):
        return None


def cluster_state(topology: Topology, among: list[str] | None = None) -> dict | None:
    for db in among or list(topology.databases):
        state = get_json(topology.databases[db]["patroni"] + "/cluster", timeout=1.0)
        if state and state.get("members"):
            return state
    return None


def role(topology: Topology, db: str) -> str:
    """What ``db``'s own Patroni says it is: primary, replica, ... or unreachable."""
    state = get_json(topology.databases[db]["patroni"] + "/patroni")
    if state is None:
        return "unreachable"
    name = state.get("role", "?")
    name = "primary" if name in ("master", "leader", "primary") else name
    return name if state.get("state") == "running" else f"{name} ({state.get('state')})"


def leader_name(topology: Topology) -> str:
    member = leader(cluster_state(topology))
    if member is None:
        raise SystemExit("network_probe: no leader")
    return member["name"]


def sync_standby(topology: Topology) -> str | None:
    state = cluster_state(topology) or {}
    return next((m["name"] for m in state.get("members", []) if m.get("role") == "sync_standby"), None)


def healthy(state: dict | None) -> bool:
    """A leader, a synchronous standby and a replica, all running on the leader's timeline
    and within 1 MiB of it. (Patroni 3.0 reports a replica that has not rejoined, one whose
    rewind failed, say, as running too: its timeline and lag tell.)"""
    if not whole(state):
        return False
    timelines = {member.get("timeline") for member in state["members"]}
    return len(timelines) == 1 and None not in timelines


def streaming(topology: Topology, state: dict) -> bool:
    """Both replicas stream from the leader, as the leader's own PostgreSQL sees them. Patroni's
    view alone is not enough: a replica still rewinding (pg_rewind) shows its last report, and
    a fault that takes the leader then leaves it stuck (Patroni 3.0's rewind gives up and starts
    it with nobody to follow; patroni/patroni#3648, #3675)."""
    primary = leader(state)["name"]
    try:
        with topology.postgres(primary, dbname="postgres") as connection:
            rows = connection.execute("SELECT application_name FROM pg_stat_replication WHERE state = 'streaming'")
            names = {row[0] for row in rows}
    except psycopg.Error:
        return False
    return names >= {db for db in topology.databases if db != primary}


def wait_whole(topology: Topology, limit: float = WAIT_LIMIT) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        state = cluster_state(topology)
        if healthy(state) and streaming(topology, state):
            return time.monotonic() - started
        time.sleep(0.3)
    return None


# ------------------------------------------------------------------- MCP ---
def call_tool(client: httpx2.Client, base: str, token: str, name: str, arguments: dict) -> failover_probe.Answer:
    """failover_probe's call (JSON-RPC tools/call over Streamable HTTP, its answer classified),
    with a refused token's 401 named as the checker names it."""
    answer = failover_probe.call_tool(client, base, token, name, arguments)
    if answer.kind == "http 401":
        answer.kind = "401"
    return answer


class History:
    """Every call and fault, in memory and one JSON line each in ``path``."""

    def __init__(self, path: Path) -> None:
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.file = open(path, "w")  # noqa: SIM115 (open for the whole run)

    def now(self) -> float:
        return round(time.monotonic() - self.started, 4)

    def add(self, record: dict) -> None:
        with self.lock:
            self.records.append(record)
            self.file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.file.close()


# ------------------------------------------------------------------ load ---
class Known:
    """What the clients know: entries they may read, and the saves they may send again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[str] = []
        self.hot: list[str] = []


class Agent(threading.Thread):
    def __init__(self, name: str, probe: "Probe", token_name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.probe = probe
        self.token_name = token_name
        self.client = httpx2.Client(
            verify=probe.topology.data["cert"], limits=httpx2.Limits(keepalive_expiry=CLIENT_KEEPALIVE)
        )
        self.count = 0
        self.rng = random.Random(f"{name}-{probe.seed}")

    @property
    def token(self) -> str:
        return self.probe.tokens[self.token_name]

    def call(self, op: str, tool: str, arguments: dict) -> dict:
        history = self.probe.history
        invoked = history.now()
        answer = call_tool(self.client, self.probe.base, self.token, tool, arguments)
        record = {
            "op": op,
            "process": self.name,
            "token": self.token_name,
            "invoked": invoked,
            "completed": history.now(),
            "answer": answer.kind,
            "args": arguments,
        }
        if answer.result is not None:
            if "entry" in answer.result:
                record["entry"] = answer.result["entry"]
            if "entries" in answer.result:
                record["entries"] = answer.result["entries"]
            if "nextCursor" in answer.result:
                record["nextCursor"] = answer.result["nextCursor"]
        history.add(record)
        return record

    def write(self, op: str, tool: str, arguments: dict) -> dict:
        """A write, sent again with the same arguments while it is refused (bounded)."""
        deadline = time.monotonic() + RETRY_LIMIT
        while True:
            record = self.call(op, tool, arguments)
            if record["answer"] not in REFUSED and not record["answer"].startswith("no answer"):
                return record
            if time.monotonic() > deadline or self.probe.stopping_hard.is_set():
                return record
            time.sleep(RETRY_PAUSE)

    def nonce(self) -> str:
        self.count += 1
        return f"{self.name}-{self.count}-{uuid.uuid4().hex[:8]}"

    def run(self) -> None:
        while not self.probe.stop.is_set():
            self.step()
            time.sleep(PAUSE)

    def step(self) -> None:
        raise NotImplementedError


class Writer(Agent):
    """Saves (some sent again after their acknowledgement) and updates its own entries."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.saves: list[dict] = []  # acknowledged saves' arguments
        self.mine: dict[str, int] = {}  # entry -> the revision this writer last saw

    def step(self) -> None:
        roll = self.rng.random()
        if len(self.mine) < 3 or roll < 0.55:
            nonce = self.nonce()
            arguments = {
                "requestId": f"save-{nonce}",
                "entry": {"content": f"save {nonce}", "tags": [self.name, "net"]},
            }
            record = self.write("save", "field_notes_save", arguments)
            if record["answer"] == "ok":
                self.saves.append(arguments)
                self.mine[record["entry"]["id"]] = record["entry"]["revision"]
                with self.probe.known.lock:
                    self.probe.known.entries.append(record["entry"]["id"])
        elif roll < 0.7:
            self.write("save", "field_notes_save", self.rng.choice(self.saves))  # the same request again
        else:
            entry_id = self.rng.choice(list(self.mine))
            arguments = {
                "id": entry_id,
                "expectedRevision": self.mine[entry_id],
                "entry": {"content": f"update {self.nonce()}", "tags": [self.name, "net"]},
            }
            record = self.write("update", "field_notes_update", arguments)
            if record["answer"] == "ok":
                self.mine[entry_id] = record["entry"]["revision"]
            elif record["answer"] == "conflict":  # a refused try had committed: read where it is
                seen = self.call("get", "field_notes_get", {"id": entry_id})
                if seen["answer"] == "ok":
                    self.mine[entry_id] = seen["entry"]["revision"]


class Racer(Agent):
    """Updates the shared entries from the revision it just read: racers collide on purpose."""

    def step(self) -> None:
        with self.probe.known.lock:
            entry_id = self.rng.choice(self.probe.known.hot)
        seen = self.call("get", "field_notes_get", {"id": entry_id})
        if seen["answer"] != "ok":
            return
        arguments = {
            "id": entry_id,
            "expectedRevision": seen["entry"]["revision"],
            "entry": {"content": f"race {self.nonce()}", "tags": ["hot", "net"]},
        }
        self.write("update", "field_notes_update", arguments)


class Reader(Agent):
    def step(self) -> None:
        roll = self.rng.random()
        with self.probe.known.lock:
            entries = self.probe.known.entries + self.probe.known.hot
        if roll < 0.6 and entries:
            self.call("get", "field_notes_get", {"id": self.rng.choice(entries)})
        elif roll < 0.9:
            page = self.call("search", "field_notes_search", {"tag": "net", "limit": 20})
            if page.get("nextCursor") and self.rng.random() < 0.5:
                self.call("search", "field_notes_search", {"tag": "net", "limit": 20, "cursor": page["nextCursor"]})
        else:
            self.call("search", "field_notes_search", {"limit": 50})


class Victim(Agent):
    """An agent whose token is revoked midway: afterwards nothing it asks may succeed."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.mine: list[str] = []

    def step(self) -> None:
        if not self.mine or self.rng.random() < 0.4:
            nonce = self.nonce()
            arguments = {"requestId": f"save-{nonce}", "entry": {"content": f"save {nonce}", "tags": ["victim"]}}
            record = self.write("save", "field_notes_save", arguments)
            if record["answer"] == "ok":
                self.mine.append(record["entry"]["id"])
        elif self.rng.random() < 0.5:
            self.call("get", "field_notes_get", {"id": self.rng.choice(self.mine)})
        else:
            self.call("search", "field_notes_search", {"tag": "victim", "limit": 10})


# ---------------------------------------------------------------- faults ---
@dataclass
class FaultRow:
    name: str
    detail: str = ""
    start: float = 0.0
    end: float = 0.0
    heal: float | None = None
    gap_limit: float | None = None  # the checker's bound for this fault, if not its default
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # the product's failures
    # The state the fault is about, not reached: the fault did not run (a harness error).
    precondition: str | None = None


class Probe:
    def __init__(self, topology: Topology, seed: int) -> None:
        self.topology = topology
        self.seed = seed
        self.base = topology.data["lb"]
        self.history = History(topology.work / "history.jsonl")
        self.known = Known()
        self.stop = threading.Event()
        self.stopping_hard = threading.Event()
        self.tokens = {"main": os.environ["NETWORK_TOKEN"], "victim": os.environ["NETWORK_VICTIM_TOKEN"]}
        self.faults: list[FaultRow] = []
        self.isolated_writes: list[str] = []  # what a direct INSERT on an isolated primary got
        self.last_failover: tuple[str, str] | None = None  # (old primary, new primary) of the latest
        self.rewinds_before_failover: dict[str, int] = {}  # each node's pg_rewind count before it

    # -- helpers ---------------------------------------------------------------------------
    def record_fault(self, row: FaultRow) -> None:
        self.faults.append(row)
        if row.precondition is not None:
            log(f"{row.name}: HARNESS ERROR, not run: precondition not reached: {row.precondition}")
            return
        record = {"op": "fault", "name": row.name, "start": row.start, "end": row.end}
        if row.heal is not None:
            record["heal"] = row.heal
        if row.gap_limit is not None:
            record["gap_limit"] = row.gap_limit
        self.history.add(record)
        log(f"{row.name}: {row.detail} ({row.end - row.start:.1f} s) {'; '.join(row.notes)}")

    def blackhole(self, host: str, targets: list[str], add: bool = True) -> None:
        """Routes on ``host`` that drop its packets to ``targets``, added (or removed) by one
        ``ip -batch``: they take effect together, not one fork apart each on a busy machine."""
        verb = "add" if add else "del"
        commands = "".join(f"route {verb} blackhole {self.topology.address(target)}\n" for target in targets)
        done = subprocess.run(
            ["ip", "-n", self.topology.hosts[host]["namespace"], "-force", "-batch", "-"],
            input=commands,
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if done.returncode and add:
            raise SystemExit(f"network_probe: blackhole on {host}: {done.stderr.strip()}")

    def partition(self, side: list[str], other: list[str], add: bool = True) -> None:
        """Cut (or heal) every path between the hosts of ``side`` and those of ``other``, both ways."""
        for host in side:
            self.blackhole(host, other, add)
        for host in other:
            self.blackhole(host, side, add)

    def silence(self, host: str, add: bool = True) -> None:
        """``host`` falls silent (or speaks again): a blackhole on it for every other host, so its
        packets are lost on the way out and its peers hear nothing, not even a reset."""
        self.blackhole(host, [other for other in self.topology.hosts if other != host], add)

    def link(self, host: str, up: bool) -> None:
        done = self.topology.run_in(host, "ip", "link", "set", "eth0", "up" if up else "down")
        if done.returncode:
            raise SystemExit(f"network_probe: link of {host}: {done.stderr.strip()}")

    def wait_for(self, what: str, test: Callable[[], bool], limit: float) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < limit:
            if test():
                return self.history.now()
            time.sleep(0.1)
        log(f"timed out waiting for {what}")
        return None

    def acknowledged_write_after(self, moment: float) -> bool:
        with self.history.lock:
            return any(
                r.get("answer") == "ok" and r.get("op") in ("save", "update") and r["completed"] > moment
                for r in reversed(self.history.records[-400:])
            )

    def settle(self, row: FaultRow) -> None:
        """The end of a fault: the cluster whole again, and writes acknowledged again."""
        if wait_whole(self.topology) is None:
            row.failed.append("the cluster did not become whole again")
        moment = self.history.now()
        if self.wait_for("an acknowledged write", lambda: self.acknowledged_write_after(moment), WAIT_LIMIT) is None:
            row.failed.append("no write was acknowledged afterwards")
        row.end = self.history.now()

    # -- preconditions ---------------------------------------------------------------------
    def arrange(self, row: FaultRow, what: str, reached: Callable[[], bool], limit: float = WAIT_LIMIT) -> bool:
        """Wait up to ``limit`` for the state ``row``'s fault is about. Not reached: the fault is
        not run, and the run ends in a harness error naming ``what`` (never a product failure:
        the product was not put to that test)."""
        if self.wait_for(what, reached, limit) is not None:
            return True
        row.precondition = f"{what} (within {limit:.0f} s)"
        return False

    def whole_now(self) -> bool:
        state = cluster_state(self.topology)
        return healthy(state) and streaming(self.topology, state)

    def arrange_whole(self, row: FaultRow) -> bool:
        return self.arrange(
            row, "the cluster whole: a leader, a synchronous standby and a replica, both streaming", self.whole_now
        )

    def roles(self) -> tuple[str, str, str]:
        """The leader, the synchronous standby and the other replica, of a whole cluster."""
        state = cluster_state(self.topology)
        primary = leader(state)["name"]
        standby = next(m["name"] for m in state["members"] if m.get("role") == "sync_standby")
        other = next(db for db in self.topology.databases if db not in (primary, standby))
        return primary, standby, other

    def just_after_failover(self) -> bool:
        """The latest failover's new primary leads, and its old primary, rewound, streams from
        it as the replica that is not synchronous."""
        if self.last_failover is None or not self.whole_now():
            return False
        old, new = self.last_failover
        primary, standby, _ = self.roles()
        return primary == new and standby != old

    def fail_over(self) -> tuple[str, str] | None:
        """A failover of our own: the primary's postmaster killed (Patroni promotes the
        synchronous standby, then rewinds the old primary and starts it as a replica)."""
        old = leader_name(self.topology)
        os.kill(postmaster_pid(self.topology.databases[old]["data_dir"]), signal.SIGKILL)
        others = [db for db in self.topology.databases if db != old]
        if (
            self.wait_for(
                "a new primary", lambda: any(role(self.topology, db) == "primary" for db in others), WAIT_LIMIT
            )
            is None
        ):
            return None
        self.last_failover = (old, next(db for db in others if role(self.topology, db) == "primary"))
        return self.last_failover

    # -- the faults ------------------------------------------------------------------------
    def primary_partitioned(self) -> FaultRow:
        row = FaultRow("primary partitioned")
        if not self.arrange_whole(row):
            return row
        old = leader_name(self.topology)
        others = [db for db in self.topology.databases if db != old]
        self.rewinds_before_failover = {db: self.topology.rewinds(db) for db in self.topology.databases}
        row.start = self.history.now()
        self.partition([old], others)
        writer = threading.Thread(target=self.write_on_isolated_primary, args=(old,), daemon=True)
        writer.start()
        # Both watched at once: the old primary must step down before the new one is promoted.
        demoted = promoted = None
        new = "?"
        while (demoted is None or promoted is None) and self.history.now() < row.start + WAIT_LIMIT:
            if demoted is None and role(self.topology, old) != "primary":
                demoted = self.history.now()
            if promoted is None:
                new = next((db for db in others if role(self.topology, db) == "primary"), "?")
                if new != "?":
                    promoted = self.history.now()
            time.sleep(0.1)
        # Held long enough for writes to flow on the new primary while the old one is still cut off.
        hold_until = max(row.start + 20, (promoted or row.start) + 5)
        while self.history.now() < hold_until:
            time.sleep(0.2)
        writer.join(timeout=CALL_TIMEOUT)
        row.heal = None
        self.partition([old], others, add=False)
        row.detail = f"{old} -> {new}"
        if demoted is not None:
            row.notes.append(f"{old} stopped being primary after {demoted - row.start:.1f} s")
        if promoted is not None:
            row.notes.append(f"{new} primary after {promoted - row.start:.1f} s")
        if demoted is None or promoted is None or demoted > promoted:
            row.failed.append("the old primary did not step down before a new one was promoted")
        if new != "?":
            self.last_failover = (old, new)
        row.notes.append(f"a direct INSERT on the isolated {old}: {', '.join(self.isolated_writes) or 'none'}")
        if any(outcome.startswith("committed") for outcome in self.isolated_writes):
            row.failed.append("the isolated old primary acknowledged a write")
        self.settle(row)
        return row

    def write_on_isolated_primary(self, db: str) -> None:
        """An INSERT straight to the isolated primary (the client host still reaches it): it
        must fail or still be waiting when the fault ends, never commit. Nothing cancels it
        (a cancelled wait for the synchronous standby would commit locally)."""
        started = time.monotonic()
        try:
            with self.topology.postgres(db, dbname="postgres", autocommit=True) as connection:
                connection.execute("INSERT INTO partition_probe (note) VALUES (%s)", [f"isolated {db}"])
            self.isolated_writes.append(f"committed after {time.monotonic() - started:.1f} s")
        except psycopg.Error as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.isolated_writes.append(f"refused after {time.monotonic() - started:.1f} s ({first[:80]})")

    def app_host_cut_off(self) -> FaultRow:
        """The database hosts' packets to app1 are lost on the way, and app1 cannot tell: its
        own packets still leave (and arrive, so a statement may run with its answer lost), its
        connections simply stop answering, as on a network that drops them. (A blackhole on
        app1 itself would fail its sends at once, which no real network does.)"""
        row = FaultRow("application host cut off", "the answers of db1-db3 to app1 lost")
        if not self.arrange_whole(row):
            return row
        dbs = list(self.topology.databases)
        row.start = self.history.now()
        for db in dbs:
            self.blackhole(db, ["app1"])
        # Longer than the client's timeout: a call that waits for a lost answer must not.
        while self.history.now() < row.start + CALL_TIMEOUT + 10:
            time.sleep(0.2)
        for db in dbs:
            self.blackhole(db, ["app1"], add=False)
        healed = self.history.now()
        workers = [w for w in self.topology.data["workers"] if self.topology.address("app1") in w]
        back = self.wait_for("app1's workers healthy", lambda: all(healthz(w) == 200 for w in workers), WAIT_LIMIT)
        if back is None:
            row.failed.append("app1's workers did not answer /healthz 200 after the heal")
        else:
            row.notes.append(f"app1 healthy {back - healed:.1f} s after the heal")
        self.settle(row)
        return row

    def sync_replica_cut_off(self) -> FaultRow:
        """The synchronous standby's link down: Patroni must name the other replica."""
        row = FaultRow("synchronous replica cut off", gap_limit=SYNC_GAP_LIMIT)
        if not self.arrange_whole(row):
            return row
        _, standby, other = self.roles()
        row.start = self.history.now()
        self.link(standby, up=False)
        self.expect_synchronous(row, other)
        row.detail = f"{standby} cut off; {other} synchronous"
        self.hold(row, 20)
        self.link(standby, up=True)
        self.settle(row)
        return row

    def sync_silent_after_failover(self) -> FaultRow:
        """The case of issue 46: just after a failover, with the old primary rewound and streaming
        again, the synchronous standby's link goes silent (a blackhole: no reset, nothing). The
        primary's commits wait for that standby until its walsender gives up on it
        (wal_sender_timeout); then Patroni must name the old primary, which streams."""
        row = FaultRow("synchronous standby silent after a failover", gap_limit=SYNC_GAP_LIMIT)
        left = self.last_failover is not None and self.wait_for(
            "the state the latest failover left", self.just_after_failover, 30
        )
        if left:
            row.notes.append("the failover of the fault before")
        else:
            self.rewinds_before_failover = {db: self.topology.rewinds(db) for db in self.topology.databases}
            if not self.arrange_whole(row):
                return row
            if self.fail_over() is None:
                row.precondition = "a failover (the primary's postmaster killed): no new primary"
                return row
            if not self.arrange(
                row,
                "just after a failover: the old primary streaming again, another node synchronous",
                self.just_after_failover,
            ):
                return row
            row.notes.append("a failover made for it")
        old = self.last_failover[0]
        rewound = self.topology.rewinds(old) > self.rewinds_before_failover.get(old, 0)
        row.notes.append(f"{old} rewound (pg_rewind) before it streamed again: {'yes' if rewound else 'no'}")
        primary, standby, rejoined = self.roles()
        row.detail = f"{self.last_failover[0]} -> {primary}; {standby} silent; {rejoined} (the old primary) synchronous"
        row.start = self.history.now()
        self.silence(standby)
        self.expect_synchronous(row, rejoined)
        self.hold(row, 20)
        self.silence(standby, add=False)
        self.settle(row)
        return row

    def sync_silent_no_candidate(self) -> FaultRow:
        """The twin: the synchronous standby's link goes silent while the other replica is
        restarting (its postmaster killed a moment before) and catching up, so that no healthy
        candidate exists. Writes must wait or be refused, never hang past the client's timeout,
        and resume once the replica streams; nothing acknowledged is lost."""
        row = FaultRow("synchronous standby silent, no candidate", gap_limit=SYNC_GAP_LIMIT)
        if not self.arrange_whole(row):
            return row
        _, standby, other = self.roles()
        row.detail = f"{standby} silent while {other} restarts; {other} synchronous once it streams"
        row.start = self.history.now()
        os.kill(postmaster_pid(self.topology.databases[other]["data_dir"]), signal.SIGKILL)
        self.silence(standby)
        self.expect_synchronous(row, other)
        self.hold(row, 20)
        self.silence(standby, add=False)
        self.settle(row)
        return row

    def expect_synchronous(self, row: FaultRow, db: str) -> None:
        switched = self.wait_for(f"{db} as synchronous standby", lambda: sync_standby(self.topology) == db, 60)
        if switched is None:
            row.failed.append(f"{db} never became the synchronous standby")
        else:
            row.notes.append(f"{db} synchronous after {switched - row.start:.1f} s")

    def hold(self, row: FaultRow, seconds: float) -> None:
        while self.history.now() < row.start + seconds:
            time.sleep(0.2)

    def flaky_link(self, seconds: float = 60.0) -> FaultRow:
        row = FaultRow("flaky link")
        if not self.arrange_whole(row):
            return row
        primary = leader_name(self.topology)
        row.detail = f"app hosts <-> {primary}, {seconds:.0f} s"
        apps = [self.topology.address("app1"), self.topology.address("app2")]
        delay = self.topology.data["delay_ms"]
        rule = {"port": 5432, "peers": apps, "delay_ms": delay, "jitter_ms": 3.0, "stall_probability": 0.03}
        rule["stall_max_ms"] = 300.0
        row.start = self.history.now()
        self.topology.relay(primary, {"rules": [rule]})
        while self.history.now() < row.start + seconds:
            time.sleep(0.2)
        self.topology.relay(primary, {"rules": []})
        row.notes.append("chunks held 0-3 ms more, and 3 % of them 0-300 ms")
        self.settle(row)
        return row

    def etcd_lost(self) -> list[FaultRow]:
        one = FaultRow("etcd member lost")
        majority = FaultRow("etcd majority lost")
        if not (self.arrange_whole(one) and self.arrange(one, "etcd's three members healthy", self.etcd_healthy)):
            majority.precondition = one.precondition
            return [one, majority]
        primary = leader_name(self.topology)
        replicas = [db for db in self.topology.databases if db != primary]
        first, second = replicas[0], replicas[1]
        one.detail = f"etcd on {first} killed"
        one.start = self.history.now()
        self.kill_etcd(first)
        while self.history.now() < one.start + 10:
            time.sleep(0.2)
        one.end = self.history.now()
        majority.detail = f"etcd on {second} killed too, started again after 20 s"
        majority.start = one.end
        self.kill_etcd(second)
        while self.history.now() < majority.start + 20:
            time.sleep(0.2)
        majority.heal = self.history.now()
        self.start_etcd(second)
        resumed = self.wait_for(
            "a write after the etcd majority's return",
            lambda: self.acknowledged_write_after(majority.heal),
            WAIT_LIMIT,
        )
        if resumed is not None:
            majority.notes.append(f"writes resumed {resumed - majority.heal:.1f} s after the member returned")
        self.start_etcd(first)
        self.settle(majority)
        return [one, majority]

    def etcd_healthy(self) -> bool:
        for db in self.topology.databases:
            answer = get_json(f"http://{self.topology.address(db)}:2379/health")
            if not answer or answer.get("health") != "true":
                return False
        return True

    def kill_etcd(self, db: str) -> None:
        pid = self.topology.pid(f"etcd-{db}")
        os.kill(pid, signal.SIGKILL)

    def start_etcd(self, db: str) -> None:
        self.topology.start_in(db, f"etcd-{db}", self.topology.databases[db]["etcd_argv"])

    def postmaster_killed(self, number: int) -> FaultRow:
        row = FaultRow(f"postmaster killed #{number}")
        if not self.arrange_whole(row):
            return row
        old = leader_name(self.topology)
        pid = postmaster_pid(self.topology.databases[old]["data_dir"])
        row.start = self.history.now()
        os.kill(pid, signal.SIGKILL)
        self.settle(row)
        row.detail = f"{old} -> {leader_name(self.topology)}"
        self.last_failover = (old, leader_name(self.topology))
        return row

    def node_lost(self) -> FaultRow:
        row = FaultRow("node lost")
        if not self.arrange_whole(row):
            return row
        old = leader_name(self.topology)
        patroni, postmaster = (
            self.topology.pid(f"patroni-{old}"),
            postmaster_pid(self.topology.databases[old]["data_dir"]),
        )
        row.start = self.history.now()
        os.kill(patroni, signal.SIGKILL)
        os.kill(postmaster, signal.SIGKILL)
        others = [db for db in self.topology.databases if db != old]
        self.wait_for("a new primary", lambda: any(role(self.topology, db) == "primary" for db in others), WAIT_LIMIT)
        self.topology.start_in(old, f"patroni-{old}", self.topology.databases[old]["patroni_argv"])
        self.settle(row)
        row.detail = f"{old} -> {leader_name(self.topology)} (Patroni and PostgreSQL killed)"
        self.last_failover = (old, leader_name(self.topology))
        return row

    def revoke(self) -> None:
        """The victim's token, revoked by an operator on app2 (retried while refused)."""
        deadline = time.monotonic() + RETRY_LIMIT
        while True:
            invoked = self.history.now()
            done = subprocess.run(
                [*self.topology.data["manage"]["app2"], "revoke_tokens", "network-victim"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            answer = "ok" if done.returncode == 0 else "unavailable"
            self.history.add(
                {
                    "op": "revoke",
                    "process": "operator",
                    "token": "victim",
                    "invoked": invoked,
                    "completed": self.history.now(),
                    "answer": answer,
                    "args": {},
                }
            )
            if answer == "ok" or time.monotonic() > deadline:
                log(f"revoked the victim's token: {done.stdout.strip() or done.stderr.strip()[-200:]}")
                return
            time.sleep(1)

    # -- the run ---------------------------------------------------------------------------
    def seed_hot_entries(self) -> None:
        seeder = Writer("seed", self, "main")
        for number in range(HOT_ENTRIES):
            arguments = {
                "requestId": f"hot-{number}-{uuid.uuid4().hex[:8]}",
                "entry": {"content": f"save hot {number}"},
            }
            arguments["entry"]["tags"] = ["hot", "net"]
            record = seeder.write("save", "field_notes_save", arguments)
            if record["answer"] != "ok":
                raise SystemExit(f"network_probe: seeding a shared entry got {record['answer']}")
            self.known.hot.append(record["entry"]["id"])

    def faults_run(self) -> int:
        self.seed_hot_entries()
        agents: list[Agent] = [Writer(f"w{n}", self, "main") for n in range(WRITERS)]
        agents += [Racer(f"r{n}", self, "main") for n in range(RACERS)]
        agents += [Reader(f"q{n}", self, "main") for n in range(READERS)]
        agents.append(Victim("v0", self, "victim"))
        worker_pids = {name: self.topology.pid(name) for name in worker_names(self.topology)}
        started_at = {name: process_start(pid) for name, pid in worker_pids.items()}
        for agent in agents:
            agent.start()
        time.sleep(LOAD_BETWEEN)

        steps: list[Callable[[], FaultRow | list[FaultRow]]] = [
            self.primary_partitioned,
            self.sync_silent_after_failover,
            self.app_host_cut_off,
            self.revoke,
            self.sync_replica_cut_off,
            self.sync_silent_no_candidate,
            self.flaky_link,
            self.etcd_lost,
            lambda: self.postmaster_killed(1),
            lambda: self.postmaster_killed(2),
            lambda: self.postmaster_killed(3),
            self.node_lost,
        ]
        for step in steps:
            result = step()
            for row in result if isinstance(result, list) else [result] if result else []:
                self.record_fault(row)
            time.sleep(LOAD_BETWEEN)

        self.stop.set()
        for agent in agents:
            agent.join(timeout=RETRY_LIMIT + CALL_TIMEOUT)
        self.stopping_hard.set()
        self.history.close()
        return self.report(worker_pids, started_at)

    def report(self, worker_pids: dict, started_at: dict) -> int:
        failed: list[str] = []
        if wait_whole(self.topology) is None:
            failed.append("the cluster is not whole at the end")
        final = read_final_states(self.topology)
        (self.topology.work / "final.json").write_text(json.dumps(final))
        report = history_check.check(self.history.records, final)

        print()
        print(
            "| fault | what | longest without an acknowledged write | answers: ok / conflict / unavailable / 503 "
            "/ 401 / other | slowest call not answered ok | checker |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        rows = {row["name"]: row for row in report.faults}
        harness_errors = [fault for fault in self.faults if fault.precondition is not None]
        for fault in self.faults:
            if fault.precondition is not None:
                print(f"| {fault.name} | not run | | | | HARNESS ERROR: precondition not reached |")
                continue
            row = rows[fault.name]
            answers = Counter()
            for kind, count in row["answers"].items():
                _op, _, answer = kind.partition(" ")
                answers[answer if answer in ("ok", "conflict", "unavailable", "503", "401") else "other"] += count
            violated = report.violated_between(fault.start, fault.end)
            longest = f"{row['longest_without_ack']:.1f} s"
            if fault.gap_limit is not None:
                longest += f" (limit {fault.gap_limit:.0f} s)"
            if "resumed_after_heal" in row:
                resumed = row["resumed_after_heal"]
                longest += f" (resumed {resumed:.1f} s after the heal)" if resumed is not None else " (never resumed)"
            verdict = "pass" if not violated and not fault.failed else "FAIL " + ", ".join(violated + fault.failed)
            print(
                f"| {fault.name} | {fault.detail} | {longest} | {answers['ok']} / {answers['conflict']} / "
                f"{answers['unavailable']} / {answers['503']} / {answers['401']} / {answers['other']} "
                f"| {row['slowest_refusal']:.1f} s | {verdict} |"
            )
            failed += [f"{fault.name}: {reason}" for reason in fault.failed]
        print()
        for fault in self.faults:
            if fault.notes:
                print(f"{fault.name}: {'; '.join(fault.notes)}")
        print()
        print("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(report.answers.items())))
        print(history_check.render(report))
        restarted = [name for name, pid in worker_pids.items() if process_start(pid) != started_at[name]]
        if restarted:
            failed.append(f"workers restarted: {restarted}")
        if healthz(self.base, self.topology.data["cert"]) != 200:
            failed.append("the load balancer's /healthz is not 200 at the end")
        for reason in failed:
            print(f"FAIL  {reason}")
        # A precondition not reached is the harness's failure, not the product's: told apart in
        # the report and in the exit status (1: the product failed; HARNESS_ERROR: only that).
        for fault in harness_errors:
            print(f"HARNESS ERROR  {fault.name}: not run, precondition not reached: {fault.precondition}")
        ok = report.ok and not failed
        if not ok:
            print("\nnetwork_probe: faults FAILED")
            return 1
        if harness_errors:
            print(f"\nnetwork_probe: harness error: {len(harness_errors)} fault(s) not run")
            return HARNESS_ERROR
        print("\nnetwork_probe: faults passed")
        return 0


# ------------------------------------------------------------ final state ---
FINAL_QUERIES = {
    "entries": """
        SELECT e.id::text, e.revision, e.title, e.content, e.tags, e.related_agent_ids, e.provenance
        FROM notebook_entry e JOIN notebook_codex c ON c.id = e.codex_id JOIN auth_user u ON u.id = c.owner_id
        WHERE u.username = ANY(%s) ORDER BY e.id""",
    "revisions": """
        SELECT r.entry_id::text, r.revision, r.title, r.content, r.tags, r.related_agent_ids, r.provenance
        FROM notebook_entryrevision r JOIN notebook_codex c ON c.id = r.codex_id JOIN auth_user u ON u.id = c.owner_id
        WHERE u.username = ANY(%s) ORDER BY r.entry_id, r.revision""",
    "request_keys": """
        SELECT k.request_id, k.entry_id::text
        FROM notebook_requestkey k JOIN notebook_codex c ON c.id = k.codex_id JOIN auth_user u ON u.id = c.owner_id
        WHERE u.username = ANY(%s) ORDER BY k.request_id""",
}


def read_node(topology: Topology, db: str) -> dict:
    state = {}
    with topology.postgres(db) as connection:
        for name, query in FINAL_QUERIES.items():
            rows = connection.execute(query, [list(CODEX_USERS)]).fetchall()
            if name == "request_keys":
                state[name] = [{"request_id": r[0], "entry": r[1]} for r in rows]
            else:
                state[name] = [
                    {
                        "id": r[0],
                        "revision": r[1],
                        "title": r[2],
                        "content": r[3],
                        "tags": r[4],
                        "relatedAgentIds": r[5],
                        "provenance": r[6],
                    }
                    for r in rows
                ]
    return state


def read_final_states(topology: Topology, limit: float = 60.0) -> dict:
    """Every node's state, once they agree (replicas apply a moment after the primary) or
    after ``limit`` seconds, whatever they hold then."""
    deadline = time.monotonic() + limit
    while True:
        states = {}
        for db in topology.databases:
            try:
                states[db] = read_node(topology, db)
            except psycopg.Error as error:
                states[db] = {"entries": [], "revisions": [], "request_keys": [], "error": str(error)[:200]}
        if len({json.dumps(s, sort_keys=True) for s in states.values()}) == 1 or time.monotonic() > deadline:
            return states
        time.sleep(1)


# ------------------------------------------------------------------ cost ---
class Cost:
    """wrk through the load balancer: per tool, delay on and off, two application hosts and one."""

    TOOLS = (("get", "field_notes_get"), ("save", "field_notes_save"), ("update", "field_notes_update"))
    TOOLS += (("search_tag", "field_notes_search"),)

    def __init__(self, topology: Topology, duration: int, rounds: int, connections: tuple[int, ...]) -> None:
        self.topology = topology
        self.duration = duration
        self.rounds = rounds
        self.connections = connections
        self.token = os.environ["NETWORK_BENCH_TOKEN"]
        self.work = Path(tempfile.mkdtemp(prefix="cost-", dir=topology.work))

    def seed(self) -> tuple[list[str], list[str]]:
        ids = []
        with httpx2.Client(verify=self.topology.data["cert"]) as client:
            for number in range(240):
                arguments = {
                    "requestId": f"cost-seed-{number}",
                    "entry": {
                        "content": f"Seed note {number} about the rollback",
                        "tags": [f"t{number % 10}", "bench"],
                    },
                }
                answer = call_tool(client, self.topology.data["lb"], self.token, "field_notes_save", arguments)
                if answer.kind != "ok":
                    raise SystemExit(f"network_probe: seeding the cost codex got {answer.kind}")
                ids.append(answer.result["entry"]["id"])
        return ids[:120], ids[120:]

    def id_file(self, name: str, ids: list[str]) -> str:
        primary = leader_name(self.topology)
        with self.topology.postgres(primary) as connection:
            # wrk stops with calls in flight, which the workers still finish: the revisions are
            # read once they have, or an update of the next slice expects one that moved.
            connection.autocommit = True
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                busy = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = 'codex' AND state <> 'idle' "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                ).fetchone()[0]
                if not busy:
                    break
                time.sleep(0.1)
            rows = dict(
                connection.execute(
                    "SELECT id::text, revision FROM notebook_entry WHERE id::text = ANY(%s)", [ids]
                ).fetchall()
            )
        path = self.work / f"{name}.ids"
        path.write_text("".join(f"{i} {rows[i]}\n" for i in ids))
        return str(path)

    def turns(self, primary: str) -> dict[str, int]:
        """Turns so far, on the primary's PostgreSQL port from the application hosts, and on
        the load balancer."""
        apps = {self.topology.address("app1"), self.topology.address("app2")}
        counted = {"db": 0, "lb": 0, "app": 0}
        for counter in self.topology.relay(primary, {})["counters"]:
            if counter["port"] == 5432 and counter["peer"] in apps:
                counted["db"] += counter["turns"]
        for counter in self.topology.relay("lb", {})["counters"]:
            counted["lb"] += counter["turns"]
        for app in ("app1", "app2"):
            for counter in self.topology.relay(app, {})["counters"]:
                counted["app"] += counter["turns"]
        return counted

    def wrk(self, url: str, scenario: str, connections: int, id_file: str) -> dict:
        command = ["wrk", "-t1", f"-c{connections}", f"-d{self.duration}s", "--timeout", "30s"]
        command += ["-s", self.topology.data["lua"], url + "/mcp", "--", scenario, self.token, id_file]
        command.append(uuid.uuid4().hex[:12])
        done = subprocess.run(command, capture_output=True, text=True, timeout=self.duration + 60, check=False)
        match = re.search(r"^BENCH (.*)$", done.stdout, re.MULTILINE)
        if not match:
            raise SystemExit(f"network_probe: wrk did not report: {done.stdout} {done.stderr}")
        figures = {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}
        figures["rate"] = figures["requests"] / (figures["duration_us"] / 1e6)
        return figures

    def round_trip(self, primary: str) -> float:
        """The median time of ``SELECT 1`` from the client host to the primary, in ms: what
        the relays add to a round trip, compared between the delay on and off."""
        with self.topology.postgres(primary, dbname="postgres") as connection:
            times = []
            for _ in range(200):
                started = time.perf_counter()
                connection.execute("SELECT 1").fetchone()
                times.append(time.perf_counter() - started)
        return sorted(times)[len(times) // 2] * 1000

    def run(self) -> int:
        delay = self.topology.data["delay_ms"]
        primary = leader_name(self.topology)
        gets, updates = self.seed()
        get_file = self.id_file("get", gets)
        calibration = {}
        for on in (True, False):
            self.topology.all_relays({"default": {"delay_ms": delay if on else 0.0}})
            calibration[on] = self.round_trip(primary)
        rows = []
        targets = (("2", self.topology.data["lb"]), ("1", self.topology.data["lb_one_host"]))
        for scenario, _tool in self.TOOLS:
            for hosts, url in targets:
                for connections in self.connections:
                    slices: dict[bool, list[dict]] = {True: [], False: []}
                    # Slices of each, alternating (on, off, off, on, ...): a shared machine's
                    # speed drifts within minutes, and both see the same drift.
                    for number in range(self.rounds):
                        for on in (True, False) if number % 2 == 0 else (False, True):
                            self.topology.all_relays({"default": {"delay_ms": delay if on else 0.0}})
                            id_file = self.id_file("update", updates) if scenario == "update" else get_file
                            before = self.turns(primary)
                            figures = self.wrk(url, scenario, connections, id_file)
                            after = self.turns(primary)
                            figures["turns"] = {k: after[k] - before[k] for k in after}
                            slices[on].append(figures)
                    for on, taken in slices.items():
                        calls = max(sum(f["requests"] for f in taken), 1)
                        seconds = sum(f["duration_us"] for f in taken) / 1e6
                        row = {
                            "tool": scenario,
                            "hosts": hosts,
                            "connections": connections,
                            "delay": on,
                            "rate": calls / seconds,
                            "p50": statistics.median(f["p50_us"] for f in taken) / 1000,
                            "p99": statistics.median(f["p99_us"] for f in taken) / 1000,
                            "errors": int(sum(f["errors"] + f["socket_errors"] for f in taken)),
                        }
                        for name in ("db", "lb", "app"):
                            row[f"{name}_round_trips"] = sum(f["turns"][name] for f in taken) / calls
                        rows.append(row)
                        log(
                            f"cost {scenario} hosts={hosts} c={connections} delay={'on' if on else 'off'}: "
                            f"{row['rate']:.0f} calls/s p50 {row['p50']:.2f} ms p99 {row['p99']:.2f} ms"
                        )
        self.topology.all_relays({"default": {"delay_ms": delay}})
        (self.topology.work / "cost.json").write_text(json.dumps({"rows": rows, "calibration": calibration}))
        self.print_table(rows, calibration, delay)
        return 1 if any(row["errors"] for row in rows) else 0

    @staticmethod
    def print_table(rows: list[dict], calibration: dict, delay: float) -> None:
        print()
        print(
            f"a round trip from the client host to the primary (SELECT 1, median): {calibration[True]:.3f} ms with "
            f"the delay ({delay} ms each way), {calibration[False]:.3f} ms without"
        )
        print()
        print(
            "| tool | app hosts | connections | calls/s (delay / none) | p50 ms (delay / none) | p50 added "
            "| p99 ms (delay / none) | round trips per call: client-LB, LB-app, app-database | errors |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        by_key: dict[tuple, dict[bool, dict]] = {}
        for row in rows:
            by_key.setdefault((row["tool"], row["hosts"], row["connections"]), {})[row["delay"]] = row
        for (tool, hosts, connections), pair in by_key.items():
            on, off = pair[True], pair[False]
            print(
                f"| {tool} | {hosts} | {connections} | {on['rate']:.0f} / {off['rate']:.0f} | {on['p50']:.2f} / "
                f"{off['p50']:.2f} | {on['p50'] - off['p50']:+.2f} | {on['p99']:.1f} / {off['p99']:.1f} | "
                f"{on['lb_round_trips']:.2f}, {on['app_round_trips']:.2f}, {on['db_round_trips']:.2f} "
                f"| {on['errors'] + off['errors']} |"
            )


# --------------------------------------------------------------- helpers ---
def healthz(base: str, cert: str | None = None) -> int | None:
    try:
        return httpx2.get(base + "/healthz", timeout=5, verify=cert or True).status_code
    except httpx2.TransportError:
        return None


def postmaster_pid(data_dir: str) -> int:
    return int(Path(data_dir, "postmaster.pid").read_text().splitlines()[0])


def worker_names(topology: Topology) -> list[str]:
    return [f"worker-{app}-{port}" for app in ("app1", "app2") for port in (8001, 8002)]


def process_start(pid: int | None) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[21]
    except (OSError, TypeError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topology", required=True)
    parser.add_argument("--mode", choices=("all", "faults", "cost"), default="all")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    # Each figure of the cost table: this many slices of this many seconds, with the delay and
    # without, alternating.
    parser.add_argument("--cost-seconds", type=int, default=int(os.environ.get("NETWORK_COST_SECONDS", "2")))
    parser.add_argument("--cost-rounds", type=int, default=int(os.environ.get("NETWORK_COST_ROUNDS", "2")))
    args = parser.parse_args()
    topology = Topology(args.topology)
    log(f"seed {args.seed}; delay {topology.data['delay_ms']} ms each way on every path")
    codes = []
    if args.mode in ("all", "cost"):
        codes.append(Cost(topology, args.cost_seconds, args.cost_rounds, (1, 8)).run())
    if args.mode in ("all", "faults"):
        codes.append(Probe(topology, args.seed).faults_run())
    # A product failure (1) outranks a harness error (HARNESS_ERROR).
    return 1 if 1 in codes else max(codes)


if __name__ == "__main__":
    sys.exit(main())
