"""The OCI image's parts that run without podman: its entry point (codex_site.container), the
build context (.dockerignore), and that the Containerfile and the Kubernetes manifests agree
with each other and with the code. deploy/try_image.sh runs the image itself (CI does)."""

import http.server
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.test import SimpleTestCase

from codex_site import container
from mcp_endpoint import identity

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"


def codex(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The image's `codex` command, run from the checkout with only ``env`` of the settings."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"SECRET_KEY", "CODEX_PUBLIC_URL", "DATABASE_URL", "DJANGO_DEBUG", "CODEX_VAR_DIR"}
    }
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "codex_site.container", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


class EntryPointTest(SimpleTestCase):
    def test_every_command_refuses_to_start_without_the_two_settings_and_names_them(self) -> None:
        for args in [(), ("serve",), ("migrate",), ("manage", "check")]:
            with self.subTest(args=args):
                result = codex(*args)
                self.assertEqual(result.returncode, 1)
                self.assertIn("refuses to start: SECRET_KEY and CODEX_PUBLIC_URL are not set", result.stderr)
                self.assertNotIn("Traceback", result.stderr)
        result = codex("serve", SECRET_KEY="k" * 50)
        self.assertEqual(result.returncode, 1)
        self.assertIn("refuses to start: CODEX_PUBLIC_URL is not set", result.stderr)
        result = codex("migrate", CODEX_PUBLIC_URL="https://codex.example.com")
        self.assertIn("refuses to start: SECRET_KEY is not set", result.stderr)

    def test_a_setting_that_is_only_blank_counts_as_missing(self) -> None:
        self.assertEqual(container.missing_settings({"SECRET_KEY": "  ", "CODEX_PUBLIC_URL": "x"}), ["SECRET_KEY"])

    def test_migrate_makes_the_schema_on_the_sqlite_default(self) -> None:
        with tempfile.TemporaryDirectory() as var:
            settings = {"SECRET_KEY": "k" * 50, "CODEX_PUBLIC_URL": "https://codex.example.com", "CODEX_VAR_DIR": var}
            result = codex("migrate", **settings)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("Applying notebook.0001", result.stdout)
            self.assertTrue((Path(var) / "codex.sqlite3").is_file())
            again = codex("migrate", **settings)
            self.assertIn("No migrations to apply", again.stdout)
            # manage runs any management command, with its own refusal as one line.
            listed = codex("manage", "showmigrations", "notebook", **settings)
            self.assertEqual(listed.returncode, 0, listed.stderr)
            self.assertIn("[X] 0001", listed.stdout)

    def test_manage_passes_the_checks_refusal_on_as_one_line(self) -> None:
        result = codex("manage", "check", SECRET_KEY="k" * 50, CODEX_PUBLIC_URL="https://codex.example.com/codex")
        self.assertEqual(result.returncode, 1)
        self.assertIn("refuses to start: CODEX_PUBLIC_URL must be an origin", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_unknown_commands_and_the_listening_address_are_refused_with_the_usage(self) -> None:
        settings = {"SECRET_KEY": "k" * 50, "CODEX_PUBLIC_URL": "https://codex.example.com"}
        for args in [("launch",), ("migrate", "notebook"), ("manage",)]:
            with self.subTest(args=args):
                result = codex(*args, **settings)
                self.assertEqual(result.returncode, 1)
                self.assertIn("usage: codex", result.stderr)
        for option in ["--port", "--port=9000", "--host", "--uds"]:
            with self.subTest(option=option):
                result = codex("serve", option, **settings)
                self.assertEqual(result.returncode, 1)
                self.assertIn("is the image's (0.0.0.0:8000)", result.stderr)

    def test_serve_migrates_only_the_sqlite_default_itself(self) -> None:
        self.assertTrue(container.on_sqlite({}))
        self.assertTrue(container.on_sqlite({"DATABASE_URL": "sqlite:////var/lib/agent-codex/other.sqlite3"}))
        self.assertFalse(container.on_sqlite({"DATABASE_URL": "postgresql://codex@db:5432/codex"}))

    def test_the_server_listens_on_every_address_on_the_exposed_port(self) -> None:
        self.assertEqual(
            container.serve_args(["--workers", "2"]), ["--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
        )


class HealthCheckTest(SimpleTestCase):
    """`codex healthcheck` against a real HTTP server standing in for the application."""

    def serve(self, status: int) -> tuple[int, list[str]]:
        hosts: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hosts.append(f"{self.path} {self.headers['Host']}")
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return server.server_address[1], hosts

    def test_it_passes_on_200_asking_with_the_public_host(self) -> None:
        port, asked = self.serve(200)
        environ = {"CODEX_PUBLIC_URL": "https://codex.example.com"}
        self.assertEqual(container.healthcheck(environ, port), 0)
        self.assertEqual(asked, ["/healthz codex.example.com"])

    def test_it_fails_while_the_database_is_unreachable_or_nothing_listens(self) -> None:
        port, _ = self.serve(503)
        self.assertEqual(container.healthcheck({}, port), 1)
        bound = socket.socket()  # a port that is taken, where nothing listens
        self.addCleanup(bound.close)
        bound.bind(("127.0.0.1", 0))
        self.assertEqual(container.healthcheck({}, bound.getsockname()[1]), 1)

    def test_the_image_command_exists_without_any_setting(self) -> None:
        result = codex("healthcheck")  # nothing listens on 8000 here: unhealthy, not a refusal
        self.assertEqual(result.returncode, 1)
        self.assertNotIn("refuses to start", result.stderr)


class BuildContextTest(SimpleTestCase):
    def included(self) -> set[str]:
        lines = (ROOT / ".dockerignore").read_text().splitlines()
        return {line[1:] for line in lines if line.startswith("!")}

    def test_every_package_and_the_templates_are_in_the_build_context(self) -> None:
        needed = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
        self.assertEqual(needed | {"templates", "manage.py", "requirements.txt"}, self.included())

    def test_it_starts_from_nothing(self) -> None:
        # var/ holds a local secret key and a generated password: only what is listed goes in.
        lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
        self.assertEqual(lines[0], "*")


class ImageAndManifestsTest(SimpleTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.containerfile = (ROOT / "Containerfile").read_text()
        kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
        cls.resources = kustomization["resources"]
        cls.docs = {}
        for name in cls.resources:
            document = yaml.safe_load((KUBERNETES / name).read_text())
            cls.docs[document["kind"]] = document
        cls.pods = {
            "Deployment": cls.docs["Deployment"]["spec"]["template"]["spec"],
            "Job": cls.docs["Job"]["spec"]["template"]["spec"],
        }

    def instruction(self, name: str) -> str:
        return re.search(rf"^{name} (.+)$", self.containerfile, re.M).group(1)

    def test_kustomization_lists_every_manifest(self) -> None:
        self.assertEqual(
            sorted(self.resources),
            sorted(path.name for path in KUBERNETES.glob("*.yaml") if path.name != "kustomization.yaml"),
        )

    def test_the_image_declares_the_entry_points_port_user_volume_and_health_check(self) -> None:
        self.assertEqual(self.instruction("EXPOSE"), str(container.PORT))
        self.assertEqual(self.instruction("ENTRYPOINT"), '["codex"]')
        self.assertIn("-m codex_site.container", self.containerfile)
        self.assertTrue(self.instruction("HEALTHCHECK").endswith('CMD ["codex", "healthcheck"]'))
        self.assertRegex(self.instruction("USER"), r"^\d+:\d+$")  # numeric: runAsNonRoot can check it
        self.assertEqual(self.instruction("VOLUME"), re.search(r"CODEX_VAR_DIR=(\S+)", self.containerfile).group(1))

    def test_the_image_carries_the_registry_name_the_server_derives(self) -> None:
        # The label's default is the name a server with no DNS name of its own reports (one record:
        # mcp_endpoint.identity); a build that sets CODEX_REGISTRY_NAME labels the image with it.
        default = re.search(r"^ARG CODEX_REGISTRY_NAME=(\S+)$", self.containerfile, re.M).group(1)
        unnamed = identity.Instance("http://127.0.0.1:8000", "http://127.0.0.1:8000/mcp")
        self.assertEqual(default, unnamed.registry_name)
        self.assertIsNone(identity.registry_name_problem(default))
        self.assertIn('LABEL io.modelcontextprotocol.server.name="${CODEX_REGISTRY_NAME}"', self.containerfile)
        build = (ROOT / "scripts" / "build_image.sh").read_text()
        self.assertIn('--build-arg "CODEX_REGISTRY_NAME=$CODEX_REGISTRY_NAME"', build)

    def test_pods_run_the_images_user_without_privileges_on_a_read_only_root(self) -> None:
        user, group = self.instruction("USER").split(":")
        for kind, pod in self.pods.items():
            with self.subTest(kind=kind):
                self.assertEqual(
                    (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]), (int(user), int(group))
                )
                self.assertIs(pod["securityContext"]["runAsNonRoot"], True)
                self.assertIs(pod["automountServiceAccountToken"], False)
                (server,) = pod["containers"]
                self.assertEqual(
                    server["securityContext"],
                    {
                        "runAsNonRoot": True,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                )
                self.assertIn("/tmp", [mount["mountPath"] for mount in server["volumeMounts"]])
                self.assertEqual(
                    server["envFrom"],
                    [{"configMapRef": {"name": "agent-codex"}}, {"secretRef": {"name": "agent-codex"}}],
                )
                self.assertIn("memory", server["resources"]["limits"])

    def test_the_job_migrates_with_the_image_the_deployment_serves(self) -> None:
        (job,) = self.pods["Job"]["containers"]
        (server,) = self.pods["Deployment"]["containers"]
        self.assertEqual(job["image"], server["image"])
        self.assertEqual(job["args"], ["migrate"])
        self.assertEqual(server["args"], ["serve"])
        self.assertEqual(self.docs["Job"]["spec"]["parallelism"], 1)
        self.assertEqual(self.docs["Deployment"]["spec"]["replicas"], 2)

    def test_the_probes_ask_healthz_with_the_public_host_on_the_exposed_port(self) -> None:
        (server,) = self.pods["Deployment"]["containers"]
        public_host = urlsplit(self.docs["ConfigMap"]["data"]["CODEX_PUBLIC_URL"]).hostname
        self.assertIn(public_host, self.docs["ConfigMap"]["data"]["ALLOWED_HOSTS"].split(","))
        self.assertEqual(server["ports"], [{"name": "http", "containerPort": container.PORT}])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            with self.subTest(probe=probe):
                check = server[probe]["httpGet"]
                self.assertEqual((check["path"], check["port"]), ("/healthz", "http"))
                self.assertEqual(check["httpHeaders"], [{"name": "Host", "value": public_host}])
        self.assertEqual(self.docs["Service"]["spec"]["ports"][0]["targetPort"], "http")

    def test_the_configmap_and_secret_set_settings_the_code_reads_and_the_two_it_needs(self) -> None:
        code = "\n".join(
            path.read_text() for path in [ROOT / "codex_site" / "settings.py", ROOT / "codex_site" / "serve.py"]
        )
        keys = [*self.docs["ConfigMap"]["data"], *self.docs["Secret"]["stringData"]]
        for key in keys:
            with self.subTest(key=key):
                self.assertIn(f'"{key}"', code)
        self.assertLessEqual(set(container.REQUIRED), set(keys))
        self.assertIn("DATABASE_URL", self.docs["Secret"]["stringData"])
        self.assertNotIn("SECRET_KEY", self.docs["ConfigMap"]["data"])
