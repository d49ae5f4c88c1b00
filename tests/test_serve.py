"""How uvicorn is started (codex_site.serve): proxy headers only from configured
proxies (the client's address and the request's scheme alike), and a concurrency limit that
answers 503."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from django.test import SimpleTestCase

from codex_site.serve import uvicorn_args
from tests.hostile import raw_request
from tests.served import free_port, start_serve, stop, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent


class ArgumentsTest(SimpleTestCase):
    def test_proxy_headers_are_off_unless_proxies_are_configured(self) -> None:
        args = uvicorn_args({})
        self.assertIn("--no-proxy-headers", args)
        self.assertNotIn("--forwarded-allow-ips", args)
        args = uvicorn_args({"CODEX_TRUSTED_PROXIES": "10.0.0.5, 10.0.0.6"})
        self.assertIn("--proxy-headers", args)
        self.assertEqual(args[args.index("--forwarded-allow-ips") + 1], "10.0.0.5,10.0.0.6")

    def test_a_unix_socket_needs_every_peers_proxy_headers_trusted(self) -> None:
        # Its peer has no address: with any narrower list every client would be "unknown".
        for proxies in ("", "127.0.0.1"):
            for uds in (["--uds", "/run/codex.sock"], ["--uds=/run/codex.sock"]):
                with self.subTest(proxies=proxies, uds=uds), self.assertRaises(SystemExit):
                    uvicorn_args({"CODEX_TRUSTED_PROXIES": proxies}, uds)
        args = uvicorn_args({"CODEX_TRUSTED_PROXIES": "*"}, ["--uds", "/run/codex.sock"])
        self.assertEqual(args[args.index("--forwarded-allow-ips") + 1], "*")

    def test_concurrency_and_keep_alive_are_bounded(self) -> None:
        args = uvicorn_args({"CODEX_LIMIT_CONCURRENCY": "50", "CODEX_KEEPALIVE_SECONDS": "3"})
        self.assertEqual(args[args.index("--limit-concurrency") + 1], "50")
        self.assertEqual(args[args.index("--timeout-keep-alive") + 1], "3")
        self.assertGreaterEqual(int(uvicorn_args({})[uvicorn_args({}).index("--limit-concurrency") + 1]), 16)
        with self.assertRaises(SystemExit):
            uvicorn_args({"CODEX_LIMIT_CONCURRENCY": "many"})


class ProxyKeepAliveTest(SimpleTestCase):
    def test_nginx_lets_an_idle_connection_to_a_worker_go_before_the_worker_does(self) -> None:
        # A worker closes an idle connection after its keep-alive; nginx reusing one just then
        # gets no answer, and a POST (every tool call) is not retried: the client gets a 502
        # (seen once in deploy/try_network.sh). So nginx gives its idle ones up first.
        conf = (ROOT / "deploy" / "nginx" / "agent-codex.conf").read_text()
        upstream = re.search(r"upstream agent_codex \{(.*?)\}", conf, re.S).group(1)
        nginx_idle = re.search(r"^\s*keepalive_timeout\s+(\d+)s;", upstream, re.M)
        self.assertIsNotNone(nginx_idle, "the upstream block sets no keepalive_timeout (nginx's default is 60 s)")
        args = uvicorn_args({})
        worker_idle = int(args[args.index("--timeout-keep-alive") + 1])
        self.assertLess(int(nginx_idle.group(1)), worker_idle)


class ServedProcessTest(SimpleTestCase):
    """The real entry point, as `make run` and the systemd units start it."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.port = free_port()
        cls.base = f"http://127.0.0.1:{cls.port}"
        cls.env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "DJANGO_DEBUG", "CODEX_TRUSTED_PROXIES"}
        }
        cls.env.update(
            SECRET_KEY="serve-test-" + "k" * 40,
            CODEX_VAR_DIR=cls.tmp.name,
            CODEX_PUBLIC_URL=cls.base,
            CODEX_DCR_RATE_LIMIT="1",
            CODEX_LIMIT_CONCURRENCY="3",
            CODEX_LOG_LEVEL="ERROR",
            CODEX_BODY_TIMEOUT_SECONDS="2",
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=cls.env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        cls.process = start_serve(cls.port, cls.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_healthy(cls.base, cls.process, timeout=30)

    @classmethod
    def tearDownClass(cls) -> None:
        stop(cls.process)
        cls.tmp.cleanup()
        super().tearDownClass()

    def register(self, forwarded_for: str) -> int:
        body = {
            "redirect_uris": ["http://127.0.0.1:9/cb"],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        }
        response = httpx2.post(self.base + "/o/register/", json=body, headers={"X-Forwarded-For": forwarded_for})
        return response.status_code

    def test_a_local_client_cannot_choose_its_address_with_x_forwarded_for(self) -> None:
        # The limit is one registration per address per hour: a spoofed address would get a fresh count.
        self.assertEqual([self.register("203.0.113.1"), self.register("203.0.113.2")], [201, 429])

    def test_past_the_concurrency_limit_new_requests_get_503(self) -> None:
        idle = [socket.create_connection(("127.0.0.1", self.port)) for _ in range(3)]
        try:
            # Counted once the server has accepted them, which a loaded machine may delay: asked
            # until then (bounded), not after a guessed pause.
            deadline = time.monotonic() + 15
            while (status := httpx2.get(self.base + "/healthz", timeout=5).status_code) != 503:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.assertEqual(status, 503)
        finally:
            for sock in idle:
                sock.close()
        # The slots free once the server has read the closes, which a loaded machine may
        # delay: asked again until then (bounded).
        deadline = time.monotonic() + 15
        while (status := httpx2.get(self.base + "/healthz", timeout=5).status_code) == 503:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(status, 200)

    def test_a_body_that_never_comes_is_answered_at_once_or_after_the_body_timeout(self) -> None:
        host = f"Host: 127.0.0.1:{self.port}\r\n"
        head = f"POST /codex/import/ HTTP/1.1\r\n{host}Content-Length: 1000000000000\r\n\r\n".encode()
        answer, took = raw_request(self.port, head, b"abcdef", wait=10)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:100])
        self.assertLess(took, 2)
        head = f"POST /accounts/login/ HTTP/1.1\r\n{host}Content-Length: 100\r\n\r\n".encode()
        answer, took = raw_request(self.port, head, b"user", wait=10)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408"), answer[:100])
        self.assertLess(took, 6)

    def test_a_websocket_upgrade_is_served_as_plain_http(self) -> None:
        response = httpx2.get(
            self.base + "/healthz",
            headers={
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            },
            timeout=5,
        )
        self.assertEqual(response.status_code, 200)


class CollectorTuningTest(SimpleTestCase):
    def test_the_served_app_freezes_its_startup_objects_and_collects_young_objects_less_often(self) -> None:
        env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
        with tempfile.TemporaryDirectory() as var:
            env.update(SECRET_KEY="gc-test-" + "k" * 40, CODEX_VAR_DIR=var, DJANGO_DEBUG="0")
            script = "import gc, codex_site.asgi; print(gc.get_threshold()[0], gc.get_freeze_count())"
            output = subprocess.run(
                [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True
            ).stdout.split()
        threshold, frozen = int(output[0]), int(output[1])
        self.assertEqual(threshold, 10_000)
        self.assertGreater(frozen, 50_000)  # Django, the SDK and the app, out of the collector's reach


class ProxySchemeTest(SimpleTestCase):
    """Whether a request came over HTTPS is what uvicorn decided: ``X-Forwarded-Proto`` counts
    from a proxy in ``CODEX_TRUSTED_PROXIES`` only, for Django as for uvicorn. Two servers with an
    https public URL, as production has, on one database: one trusts no proxy, one trusts
    127.0.0.1 (nginx on the same host, as docs/deploy.md sets it up)."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory()
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "DJANGO_DEBUG", "CODEX_TRUSTED_PROXIES"}
        }
        env.update(SECRET_KEY="serve-test-" + "k" * 40, CODEX_VAR_DIR=cls.tmp.name, CODEX_LOG_LEVEL="ERROR")
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        cls.servers: dict[str, tuple[str, subprocess.Popen]] = {}
        for name, proxies in (("untrusted", ""), ("behind nginx", "127.0.0.1")):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            served = dict(env, CODEX_PUBLIC_URL=f"https://127.0.0.1:{port}", CODEX_TRUSTED_PROXIES=proxies)
            process = start_serve(port, served, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cls.servers[name] = (base, process)
        for base, process in cls.servers.values():
            wait_until_healthy(base, process, timeout=30)

    @classmethod
    def tearDownClass(cls) -> None:
        for _, process in cls.servers.values():
            stop(process)
        cls.tmp.cleanup()
        super().tearDownClass()

    def secure(self, server: str, **headers: str) -> bool:
        """Whether that server's Django took the request for HTTPS: a next over plain HTTP to its
        own host is kept on the sign-in page only for a request that is not (common.redirects)."""
        base, _ = self.servers[server]
        target = base + "/codex/"
        page = httpx2.get(base + "/accounts/login/", params={"next": target}, headers=headers)
        self.assertEqual(page.status_code, 200, page.text[:500])
        return f'value="{target}"' not in page.text

    def test_an_untrusted_peers_x_forwarded_proto_does_not_make_a_request_secure(self) -> None:
        self.assertFalse(self.secure("untrusted"))
        self.assertFalse(self.secure("untrusted", **{"X-Forwarded-Proto": "https"}))

    def test_the_trusted_proxys_x_forwarded_proto_does(self) -> None:
        self.assertFalse(self.secure("behind nginx"))
        self.assertTrue(self.secure("behind nginx", **{"X-Forwarded-Proto": "https"}))
