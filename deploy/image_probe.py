"""The OCI image run as an operator runs it, and the Kubernetes manifests played with podman.

    bash deploy/try_image.sh                 # builds the image, starts a throwaway PostgreSQL, runs this
    python deploy/image_probe.py --image IMAGE [--podman "podman --storage-driver=vfs"]

With DATABASE_URL set (a PostgreSQL on this machine's 127.0.0.1, as scripts/with_postgres.sh
gives), the PostgreSQL cases run too; without it they fail, unless --sqlite-only. Each check is a
row of the table printed at the end; the exit status is 1 if any failed.

- settings: the image refuses to start without SECRET_KEY and CODEX_PUBLIC_URL and names them.
- SQLite: a named volume, the two settings, a read-only root; wait for the image's HEALTHCHECK to
  pass (podman healthcheck run: podman runs health checks on systemd timers, and there may be
  no systemd), run `codex migrate` as a separate container on the same volume (an orchestrator's
  job), make a person and a token with the management commands inside the container, list the
  tools and call all four with the SDK client through the published port; restart the
  container and find the entry again. The server's user (not root), and that the root file
  system refuses a write while the volume takes one.
- PostgreSQL: the same with DATABASE_URL and a writable root, and then `podman diff`: nothing
  was written outside the volume and /tmp.
- kube play: deploy/kubernetes/ played against PostgreSQL: the ConfigMap, the Secret (as podman
  4.3 reads a secret), the migration Job's pod, then the Deployment (one replica: each replica
  would publish the same host port), reached from outside through the published port; the
  securityContext checked on the running container.

Containers reach the PostgreSQL on the host's loopback through slirp4netns
(allow_host_loopback: the host is 10.0.2.2). Everything this makes is named
``codex-probe-<pid>-...`` and removed at exit, by name.
"""

import argparse
import asyncio
import base64
import copy
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "deploy" / "kubernetes"
TOOLS = ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"]
SERVER_UID = "10001"
HEALTHY_WITHIN_SECONDS = 180
HOST_LOOPBACK = "10.0.2.2"  # slirp4netns's address of the host, with allow_host_loopback
HOST_LOOPBACK_NETWORK = "slirp4netns:allow_host_loopback=true"
VOLUME = "/var/lib/agent-codex"
# What a container may change outside its volume: /tmp, and the files podman itself mounts.
WRITABLE = ("/tmp", "/var/tmp", "/run", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")


def count_migrations() -> int:
    """Every migration of every app, as this checkout (the image's source) has them."""
    program = (
        "import django; django.setup(); from django.db.migrations.loader import MigrationLoader; "
        "print(len(MigrationLoader(None, ignore_no_migrations=True).disk_migrations))"
    )
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    environment |= {"SECRET_KEY": "probe-" + "k" * 40, "DJANGO_SETTINGS_MODULE": "codex_site.settings"}
    listing = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    if listing.returncode != 0:
        raise SystemExit(f"image_probe: could not count the migrations: {listing.stderr.strip()}")
    return int(listing.stdout)


class Failed(Exception):
    """One check failed; the message says what was seen."""


class Probe:
    def __init__(self, podman: list[str], image: str) -> None:
        self.podman = podman
        self.image = image
        self.migrations = count_migrations()
        self.prefix = f"codex-probe-{os.getpid()}"
        self.rows: list[tuple[str, str, str, str]] = []  # check, result, seconds, detail
        self.containers: list[str] = []
        self.volumes: list[str] = []
        self.secrets: list[str] = []
        self.databases: list[tuple[str, str]] = []  # (server URL, database name)
        self.kube_files: list[Path] = []
        self.healthy_seconds: dict[str, str] = {}
        self.work = Path(tempfile.mkdtemp(prefix="codex-image-probe."))

    # ------------------------------------------------------------- podman ---
    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        process = subprocess.run(
            [*self.podman, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if check and process.returncode != 0:
            raise Failed(f"podman {' '.join(args[:3])} … exited {process.returncode}: {quiet(process.stderr)}")
        return process

    def inspect(self, name: str, template: str) -> str:
        return self.run("inspect", "--format", template, name).stdout.strip()

    def logs(self, name: str) -> str:
        process = self.run("logs", "--tail", "30", name, check=False)
        return (process.stdout + process.stderr).strip()

    def state(self, name: str) -> str:
        return self.inspect(name, "{{.State.Status}}")

    # -------------------------------------------------------------- table ---
    def check(self, name: str, step: Callable[[], str]) -> bool:
        started = time.monotonic()
        try:
            result, detail = "pass", step()
        except Exception as error:  # any failure of a check is its row, and the others still run
            text = str(error) if isinstance(error, Failed) else f"{type(error).__name__}: {error}"
            result, detail = "FAIL", (text.splitlines() or [repr(error)])[0][:200]
        self.rows.append((name, result, f"{time.monotonic() - started:.0f}", detail))
        print(f"image_probe: {result} {name}: {detail}", file=sys.stderr)
        return result == "pass"

    def table(self) -> str:
        width = max(len(row[0]) for row in self.rows)
        lines = [f"{'check'.ljust(width)}  result  seconds  detail", f"{'-' * width}  ------  -------  ------"]
        lines += [
            f"{name.ljust(width)}  {result.ljust(6)}  {seconds.rjust(7)}  {detail}"
            for name, result, seconds, detail in self.rows
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------ cleanup ---
    def cleanup(self) -> None:
        for path in reversed(self.kube_files):
            self.run("kube", "down", str(path), check=False, timeout=120)
        for name in reversed(self.containers):
            self.run("rm", "--force", "--time", "5", name, check=False, timeout=120)
        for name in self.volumes:
            self.run("volume", "rm", "--force", name, check=False)
        for name in self.secrets:
            self.run("secret", "rm", name, check=False)
        for server, name in self.databases:
            with psycopg.connect(server, autocommit=True) as connection:
                connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        for path in sorted(self.work.glob("*")):
            path.unlink()
        self.work.rmdir()

    # ------------------------------------------------------------- checks ---
    def health_check_declared(self) -> str:
        health = json.loads(self.inspect(self.image, "{{json .HealthCheck}}") or "null")
        if not health or health.get("Test") != ["CMD", "codex", "healthcheck"]:
            raise Failed(f"the image's health check is {health}")
        return f"{' '.join(health['Test'][1:])}, every {health['Interval'] // 10**9} s"

    def refuses_without_settings(self) -> str:
        bare = self.run("run", "--rm", self.image, check=False, timeout=120)
        half = self.run("run", "--rm", "-e", "SECRET_KEY=" + "k" * 40, self.image, check=False, timeout=120)
        if bare.returncode == 0 or "SECRET_KEY and CODEX_PUBLIC_URL are not set" not in bare.stderr:
            raise Failed(f"without settings: exit {bare.returncode}, {quiet(bare.stderr)}")
        if half.returncode == 0 or "CODEX_PUBLIC_URL is not set" not in half.stderr:
            raise Failed(f"without CODEX_PUBLIC_URL: exit {half.returncode}, {quiet(half.stderr)}")
        return "exit 1, naming SECRET_KEY and CODEX_PUBLIC_URL; then CODEX_PUBLIC_URL alone"

    def start(self, name: str, port: int, env: dict[str, str], *options: str) -> float:
        """``podman run -d`` the server; the seconds until its HEALTHCHECK first passed."""
        started = time.monotonic()
        self.containers.append(name)
        self.run("run", "--detach", "--name", name, "--publish", f"127.0.0.1:{port}:8000", *options,
                 *env_options(env), self.image)  # fmt: skip
        return self.wait_healthy(name, started)

    def wait_healthy(self, name: str, started: float) -> float:
        """The image's own HEALTHCHECK (codex healthcheck), run until it passes."""
        deadline = started + HEALTHY_WITHIN_SECONDS
        while time.monotonic() < deadline:
            if self.run("healthcheck", "run", name, check=False, timeout=60).returncode == 0:
                health = self.inspect(name, "{{.State.Health.Status}}")
                if health != "healthy":
                    raise Failed(f"the health check passed, the container's health is {health!r}")
                return time.monotonic() - started
            if self.state(name) != "running":
                raise Failed(f"{name} is {self.state(name)}: {quiet(self.logs(name))}")
            time.sleep(0.25)
        raise Failed(f"{name} not healthy within {HEALTHY_WITHIN_SECONDS} s: {quiet(self.logs(name))}")

    def migrate(self, env: dict[str, str], *options: str) -> str:
        """`codex migrate` in a container of its own, as an orchestrator's job runs it: all of them
        on an empty PostgreSQL database, none where `codex serve` migrated SQLite already."""
        process = self.run("run", "--rm", *options, *env_options(env), self.image, "migrate", timeout=600)
        applied = process.stdout.count("Applying ")
        if applied != (self.migrations if "DATABASE_URL" in env else 0):
            raise Failed(f"migrate applied {applied}: {quiet(process.stdout)}")
        return f"exit 0, {applied} migrations applied" if applied else "exit 0, no migrations to apply"

    def mint_token(self, name: str, username: str) -> str:
        self.run("exec", name, "codex", "manage", "codex_adduser", username)
        process = self.run("exec", name, "codex", "manage", "mint_token", username, "--lifetime", "3600")
        token = process.stdout.strip()
        if not token or "\n" in token:
            raise Failed(f"mint_token printed {process.stdout!r}")
        return token

    def non_root(self, name: str) -> str:
        user = self.inspect(name, "{{.Config.User}}")
        status = self.run("exec", name, "cat", "/proc/1/status").stdout
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        if set(uids) != {SERVER_UID}:
            raise Failed(f"the server (pid 1) runs with uids {uids}")
        return f"image user {user}; the server (pid 1) runs as uid {SERVER_UID} (real, effective, saved, fs)"

    def no_errors_logged(self, name: str) -> str:
        logged = self.run("logs", name)
        lines = (logged.stdout + logged.stderr).splitlines()
        errors = [line for line in lines if " ERROR " in line or " CRITICAL " in line or "Traceback" in line]
        if errors:
            raise Failed(f"{len(errors)} lines: {errors[0]}")
        # Named, not failed: WhiteNoise serves files with a synchronous iterator, which Django's
        # ASGI handler warns about once per process (in the SQLite case, which fetches a stylesheet).
        warnings = [line.rpartition("Warning: ")[2][:90] for line in lines if " WARNING " in line]
        return f"{len(lines)} lines, no ERROR or traceback" + (f"; WARNING: {warnings}" if warnings else "")

    def read_only(self, name: str) -> str:
        if self.inspect(name, "{{.HostConfig.ReadonlyRootfs}}") != "true":
            raise Failed("the root file system is not read-only")
        for path in ("/opt/agent-codex/app/probe", "/etc/probe"):
            refused = self.run("exec", name, "touch", path, check=False)
            if refused.returncode == 0 or "Read-only file system" not in refused.stderr:
                raise Failed(f"touch {path}: exit {refused.returncode} {quiet(refused.stderr)}")
        self.run("exec", name, "sh", "-c", f"touch {VOLUME}/probe && rm {VOLUME}/probe")
        return "writes to /opt and /etc refused (Read-only file system); the volume takes one"

    def writes_only_volume_and_tmp(self, name: str) -> str:
        changes = self.run("diff", name).stdout.split("\n")
        paths = [line.split(None, 1)[1] for line in changes if line.strip()]
        # A directory is listed as changed when something in it is (the files podman mounts in /etc).
        parents = {str(parent) for path in (*WRITABLE, VOLUME) for parent in Path(path).parents}
        outside = [path for path in paths if not path.startswith((*WRITABLE, VOLUME)) and path not in parents]
        if outside:
            raise Failed(f"written outside the volume and /tmp: {outside[:5]}")
        return f"podman diff: {len(paths)} paths changed, all under the volume, /tmp or podman's own mounts"

    # ---------------------------------------------------------- scenarios ---
    def run_server_case(self, label: str, env: dict[str, str], *options: str, read_only: bool) -> None:
        name = f"{self.prefix}-{label.lower()}"
        port = free_port()
        env = env | {"CODEX_PUBLIC_URL": f"http://127.0.0.1:{port}"}
        mcp_url = f"http://127.0.0.1:{port}/mcp"
        options = (*options, "--read-only") if read_only else options
        seen: dict[str, str] = {}

        def started() -> str:
            seen["healthy"] = f"{self.start(name, port, env, *options):.1f}"
            # `codex serve` migrates a SQLite database itself, never a PostgreSQL one (the Job does).
            migrated = self.run("logs", name).stdout.count("Applying ")
            if migrated != (self.migrations if "DATABASE_URL" not in env else 0):
                raise Failed(f"codex serve applied {migrated} migrations before it served")
            return f"healthy {seen['healthy']} s after podman run, having applied {migrated} migrations itself"

        if not self.check(f"{label}: starts and gets healthy", started):
            return
        self.healthy_seconds[label] = seen["healthy"]
        if read_only:
            self.check(
                f"{label}: static files collected in the image", lambda: static_served(f"http://127.0.0.1:{port}")
            )
        self.check(f"{label}: codex migrate (a separate container)", lambda: self.migrate(env, *options))

        def tools() -> str:
            seen["token"] = self.mint_token(name, "probe")
            seen["id"] = exercise_tools(mcp_url, seen["token"])
            return f"token from mint_token inside; tools/list = the four; save, get, search, update ({seen['id'][:8]}…)"

        if not self.check(f"{label}: the four tools through the SDK client", tools):
            return

        def restarted() -> str:
            started_at = time.monotonic()
            self.run("restart", "--time", "20", name, timeout=120)
            healthy = self.wait_healthy(name, started_at)
            entry = find_again(mcp_url, seen["token"], seen["id"])
            return f"healthy again in {healthy:.1f} s; the entry is there at revision {entry['revision']}"

        self.check(f"{label}: keeps its data across a restart", restarted)
        self.check(f"{label}: runs as non-root", lambda: self.non_root(name))
        self.check(f"{label}: logs no error", lambda: self.no_errors_logged(name))
        if read_only:
            self.check(f"{label}: read-only root", lambda: self.read_only(name))
        else:
            self.check(f"{label}: writes only to the volume and /tmp", lambda: self.writes_only_volume_and_tmp(name))

    def sqlite(self) -> None:
        volume = f"{self.prefix}-sqlite"
        self.volumes.append(volume)
        self.run("volume", "create", volume)
        env = {"SECRET_KEY": secrets.token_urlsafe(50)}
        self.run_server_case("SQLite", env, "--volume", f"{volume}:{VOLUME}", read_only=True)

    def postgresql(self, database_url: str) -> None:
        volume = f"{self.prefix}-postgresql"
        self.volumes.append(volume)
        self.run("volume", "create", volume)
        env = {"SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": container_database_url(database_url)}
        network = ("--network", HOST_LOOPBACK_NETWORK, "--volume", f"{volume}:{VOLUME}")
        self.run_server_case("PostgreSQL", env, *network, read_only=False)

    def fresh_database(self, database_url: str, name: str) -> str:
        """A new, empty database on the same server; its URL."""
        with psycopg.connect(database_url, autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.databases.append((database_url, name))
        return urlunsplit(urlsplit(database_url)._replace(path="/" + name))

    def kube_play(self, database_url: str) -> None:
        port = free_port()
        public = f"http://127.0.0.1:{port}"
        name = f"{self.prefix}-kube"
        # A database of its own, so that the migration Job is what makes the schema.
        database_url = self.fresh_database(database_url, name.replace("-", "_"))
        docs = {doc["kind"]: doc for doc in load_manifests()}
        config = renamed(docs["ConfigMap"], name)
        config["data"] |= {"CODEX_PUBLIC_URL": public, "ALLOWED_HOSTS": "127.0.0.1"}
        secret_values = {"SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": container_database_url(database_url)}
        if set(secret_values) != set(docs["Secret"]["stringData"]):
            raise Failed(
                f"secret.yaml holds {sorted(docs['Secret']['stringData'])}, the probe sets {sorted(secret_values)}"
            )
        job_pod = pod_of(docs["Job"], f"{name}-migrate", name, self.image)
        deployment = renamed(docs["Deployment"], name)
        deployment["spec"]["replicas"] = 1  # each replica would publish the same host port
        point_at(deployment["spec"]["template"]["spec"], name, self.image, port)

        def secret() -> str:
            # podman 4.3 reads a secretRef from a podman secret holding the Secret's data (JSON, base64).
            path = self.work / "secret.json"
            path.write_text(json.dumps({key: b64(value) for key, value in secret_values.items()}))
            self.secrets.append(name)
            self.run("secret", "create", name, str(path))
            return f"podman secret {name}: the keys of secret.yaml ({', '.join(sorted(secret_values))})"

        def migrate() -> str:
            path = self.kube_file("migrate", [config, job_pod])
            self.run("kube", "play", "--network", HOST_LOOPBACK_NETWORK, str(path), timeout=300)
            container = f"{name}-migrate-migrate"
            code = self.run("wait", container, timeout=600).stdout.strip()
            output = self.run("logs", container).stdout
            if code != "0" or output.count("Applying ") != self.migrations:
                raise Failed(f"the migration Job's pod exited {code}: {quiet(self.logs(container))}")
            return f"the Job's pod template as a pod, on an empty database: exit 0, {output.count('Applying ')} applied"

        def deploy() -> str:
            started = time.monotonic()
            path = self.kube_file("deployment", [config, deployment])
            self.run("kube", "play", "--network", HOST_LOOPBACK_NETWORK, str(path), timeout=300)
            seconds = wait_http_healthy(public, started)
            self.healthy_seconds["kube play"] = f"{seconds:.1f}"
            return f"/healthz 200 through the published port {seconds:.1f} s after kube play"

        def tools() -> str:
            container = f"{name}-pod-0-server"
            token = self.mint_token(container, "kube")
            entry_id = exercise_tools(public + "/mcp", token)
            return f"tools/list = the four; save, get, search, update ({entry_id[:8]}…) against PostgreSQL"

        def security() -> str:
            container = f"{name}-pod-0-server"
            facts = {
                "read-only root": self.inspect(container, "{{.HostConfig.ReadonlyRootfs}}") == "true",
                "no capabilities": self.inspect(container, "{{.EffectiveCaps}}") in {"[]", "<no value>"},
                "no new privileges": "no-new-privileges" in self.inspect(container, "{{.HostConfig.SecurityOpt}}"),
                f"uid {SERVER_UID}": self.non_root(container).endswith("(real, effective, saved, fs)"),
            }
            if not all(facts.values()):
                raise Failed(f"securityContext not applied: {facts}")
            return ", ".join(facts)

        steps = [
            ("kube play: Secret", secret),
            ("kube play: migration Job", migrate),
            ("kube play: Deployment healthy", deploy),
            ("kube play: the four tools through the SDK client", tools),
            ("kube play: securityContext", security),
        ]
        for label, step in steps:
            if not self.check(label, step):
                return

    def kube_file(self, stem: str, documents: list[dict]) -> Path:
        path = self.work / f"{stem}.yaml"
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        self.kube_files.append(path)
        return path


# ------------------------------------------------------------------ helpers ---
def quiet(text: str) -> str:
    """The last meaningful lines of a command's output (not podman's systemd complaints)."""
    lines = [line for line in text.strip().splitlines() if line.strip() and "systemd" not in line]
    return " | ".join(lines[-4:])


def env_options(env: dict[str, str]) -> list[str]:
    return [option for key, value in env.items() for option in ("--env", f"{key}={value}")]


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def container_database_url(database_url: str) -> str:
    """The host's PostgreSQL as a container sees it: the same URL at slirp4netns's host address."""
    parts = urlsplit(database_url)
    if parts.hostname not in {"127.0.0.1", "localhost"}:
        return database_url
    netloc = parts.netloc.rsplit("@", 1)
    host_port = netloc[-1].replace(parts.hostname, HOST_LOOPBACK, 1)
    return urlunsplit(parts._replace(netloc="@".join([*netloc[:-1], host_port])))


def load_manifests() -> list[dict]:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    return [yaml.safe_load((MANIFESTS / name).read_text()) for name in kustomization["resources"]]


def renamed(document: dict, name: str) -> dict:
    document = copy.deepcopy(document)
    document["metadata"]["name"] = name
    return document


def point_at(pod_spec: dict, name: str, image: str, port: int | None = None) -> None:
    """The pod spec with this run's image, ConfigMap and Secret (named ``name``), and the port."""
    for container in pod_spec["containers"]:
        container["image"] = image
        for source in container.get("envFrom", []):
            next(iter(source.values()))["name"] = name
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            for header in container.get(probe, {}).get("httpGet", {}).get("httpHeaders", []):
                header["value"] = "127.0.0.1"
        if port is not None:
            for published in container.get("ports", []):
                published |= {"hostPort": port, "hostIP": "127.0.0.1"}


def pod_of(job: dict, pod_name: str, name: str, image: str) -> dict:
    """A Job's pod template as a Pod (podman 4.3 plays no Jobs)."""
    template = copy.deepcopy(job["spec"]["template"])
    point_at(template["spec"], name, image)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**template.get("metadata", {}), "name": pod_name},
            "spec": template["spec"]}  # fmt: skip


def wait_http_healthy(public: str, started: float) -> float:
    deadline = started + HEALTHY_WITHIN_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(public + "/healthz", timeout=5) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise Failed(f"{public}/healthz did not answer 200 within {HEALTHY_WITHIN_SECONDS} s")


def static_served(base: str) -> str:
    """The sign-in page's stylesheet, by its hashed name, from the image's STATIC_ROOT."""
    with urllib.request.urlopen(base + "/accounts/login/", timeout=30) as answer:
        page = answer.read().decode()
    found = re.search(r'href="(/static/[^"]+\.[0-9a-f]{12}\.css)"', page)
    if not found:
        raise Failed("the sign-in page links no stylesheet by a hashed name (nothing collected?)")
    with urllib.request.urlopen(base + found.group(1), timeout=30) as answer:
        cache = answer.headers.get("Cache-Control", "")
        if answer.status != 200 or "immutable" not in cache:
            raise Failed(f"{found.group(1)}: {answer.status}, Cache-Control {cache!r}")
    return f"{found.group(1)}: 200, {cache}"


def with_client(url: str, token: str, work):
    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await work(client)

    return asyncio.run(run())


def result_of(result) -> dict:
    if result.is_error:
        raise Failed(f"tool error: {result.content[0].text if result.content else result}")
    return result.structured_content


def exercise_tools(url: str, token: str) -> str:
    """tools/list, then save, get, search and update; the entry's id."""

    async def work(client: Client) -> str:
        names = [tool.name for tool in (await client.list_tools()).tools]
        if names != TOOLS:
            raise Failed(f"tools/list: {names}")
        entry = {"content": "The image keeps this note.", "title": "Image probe", "tags": ["image-probe"]}
        saved = result_of(await client.call_tool("field_notes_save", {"requestId": "probe-1", "entry": entry}))
        entry_id = saved["entry"]["id"]
        got = result_of(await client.call_tool("field_notes_get", {"id": entry_id}))
        assert got["entry"]["content"] == entry["content"], got
        found = result_of(await client.call_tool("field_notes_search", {"query": "keeps this note"}))
        assert [e["id"] for e in found["entries"]] == [entry_id], found
        changed = {"content": "The image kept this note.", "tags": ["image-probe"]}
        arguments = {"id": entry_id, "expectedRevision": 1, "entry": changed}
        updated = result_of(await client.call_tool("field_notes_update", arguments))
        assert updated["entry"]["revision"] == 2, updated
        return entry_id

    return with_client(url, token, work)


def find_again(url: str, token: str, entry_id: str) -> dict:
    async def work(client: Client) -> dict:
        got = result_of(await client.call_tool("field_notes_get", {"id": entry_id}))["entry"]
        found = result_of(await client.call_tool("field_notes_search", {"tag": "image-probe"}))
        assert got["revision"] == 2 and got["content"] == "The image kept this note.", got
        assert [e["id"] for e in found["entries"]] == [entry_id], found
        return got

    return with_client(url, token, work)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="localhost/agent-codex:latest")
    parser.add_argument("--podman", default="podman", help='the podman command, e.g. "podman --storage-driver=vfs"')
    parser.add_argument("--sqlite-only", action="store_true", help="skip the PostgreSQL and kube play cases")
    options = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL", "")

    probe = Probe(shlex.split(options.podman), options.image)
    if probe.run("image", "exists", options.image, check=False).returncode != 0:
        print(f"image_probe: no image {options.image} (bash scripts/build_image.sh builds it)", file=sys.stderr)
        probe.cleanup()
        return 2
    try:
        size = int(probe.inspect(options.image, "{{.Size}}"))
        probe.check("image: HEALTHCHECK declared", probe.health_check_declared)
        probe.check("settings: refuses to start without them", probe.refuses_without_settings)
        probe.sqlite()
        if not options.sqlite_only:
            if not database_url:
                probe.rows.append(
                    ("PostgreSQL", "FAIL", "0", "DATABASE_URL is not set (run through scripts/with_postgres.sh)")
                )
            else:
                probe.postgresql(database_url)
                probe.kube_play(database_url)
    finally:
        probe.cleanup()

    print(f"\nimage {options.image}: {size / 1e6:.0f} MB")
    for label, seconds in probe.healthy_seconds.items():
        print(f"time to healthy, {label}: {seconds} s")
    print()
    print(probe.table())
    failed = [row[0] for row in probe.rows if row[1] != "pass"]
    print(f"\n{len(probe.rows) - len(failed)} of {len(probe.rows)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
