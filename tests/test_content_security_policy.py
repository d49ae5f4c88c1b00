"""Every page carries a Content-Security-Policy that runs no inline script or style, beside
X-Frame-Options DENY and nosniff; the pages themselves hold no inline script, style or event
handler (the browser page checks also report anything the policy refused, tests.browser)."""

import re

from django.contrib.auth import get_user_model
from django.test import TestCase

PAGES_SIGNED_OUT = ["/", "/accounts/login/", "/accounts/login/?next=/codex/", "/no-such-page/", "/admin/login/"]
PAGES_SIGNED_IN = [
    "/",
    "/codex/",
    "/codex/import/",
    "/codex/clear/",
    "/account/",
    "/account/clients/",
    "/accounts/login/",
    "/accounts/logout/",
    "/accounts/reauthenticate/",
    "/accounts/2fa/",
    "/admin/",
    "/admin/auth/user/",
    "/o/authorize/?client_id=no-such-client&response_type=code",
]
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I), "an inline script"),
    (re.compile(r"<style\b", re.I), "an inline stylesheet"),
    (re.compile(r"\sstyle=", re.I), "a style attribute"),
    (re.compile(r"\son[a-z]+=", re.I), "an event-handler attribute"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
]


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            parsed[words[0]] = words[1:]
    return parsed


class ContentSecurityPolicyTest(TestCase):
    def setUp(self) -> None:
        self.operator = get_user_model().objects.create_superuser("operator", password="operator-password")

    def check(self, path: str, answer) -> None:
        policy = directives(answer["Content-Security-Policy"])
        self.assertEqual(policy["default-src"], ["'none'"], path)
        self.assertEqual(policy["script-src"], ["'self'"], path)
        self.assertEqual(policy["style-src"], ["'self'"], path)
        self.assertEqual(policy["frame-ancestors"], ["'none'"], path)
        self.assertEqual(policy["object-src"], ["'none'"], path)
        self.assertEqual(policy["base-uri"], ["'none'"], path)
        self.assertEqual(answer["X-Frame-Options"], "DENY", path)
        self.assertEqual(answer["X-Content-Type-Options"], "nosniff", path)
        if answer["Content-Type"].startswith("text/html") and not path.startswith("/admin/"):
            html = answer.content.decode()
            for pattern, what in INLINE:
                self.assertIsNone(pattern.search(html), f"{path} has {what}")

    def test_every_page_signed_out(self) -> None:
        for path in PAGES_SIGNED_OUT:
            with self.subTest(path=path):
                self.check(path, self.client.get(path))

    def test_every_page_signed_in(self) -> None:
        self.client.force_login(self.operator)
        for path in PAGES_SIGNED_IN:
            with self.subTest(path=path):
                self.check(path, self.client.get(path))

    def test_forms_post_here_except_where_they_lead_to_a_provider_or_a_client(self) -> None:
        self.assertEqual(directives(self.client.get("/codex/")["Content-Security-Policy"])["form-action"], ["'self'"])
        self.assertEqual(
            directives(self.client.get("/accounts/login/")["Content-Security-Policy"])["form-action"], ["'self'"]
        )
        self.client.force_login(self.operator)
        refused = self.client.get("/o/authorize/?client_id=no-such-client&response_type=code")
        self.assertEqual(directives(refused["Content-Security-Policy"])["form-action"], ["'self'"])

    def test_the_sign_in_pages_forms_may_lead_to_each_providers_origin(self) -> None:
        from django.test import override_settings

        from tests.oidc import sso_settings

        provider = {
            "id": "acme",
            "issuer": "https://login.acme.test/tenant",
            "client_id": "c",
            "secret": "s",
            "domains": ["acme.test"],
        }
        with override_settings(**sso_settings(provider)):
            policy = directives(self.client.get("/accounts/login/")["Content-Security-Policy"])
        self.assertEqual(policy["form-action"], ["'self'", "https://login.acme.test"])
