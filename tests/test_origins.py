"""Which browser origins are allowed: CODEX_ALLOWED_ORIGINS, with loopback names folded."""

from django.test import SimpleTestCase, override_settings

from common.origins import origin_allowed


@override_settings(CODEX_ALLOWED_ORIGINS=["http://127.0.0.1:8000", "https://app.example.com"])
class OriginMatchingTest(SimpleTestCase):
    def test_localhost_127_0_0_1_and_ipv6_loopback_on_the_same_port_are_one_origin(self) -> None:
        for origin in ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://LOCALHOST:8000"]:
            with self.subTest(origin=origin):
                self.assertTrue(origin_allowed(origin))

    def test_a_listed_origin_matches_with_or_without_its_default_port(self) -> None:
        self.assertTrue(origin_allowed("https://app.example.com"))
        self.assertTrue(origin_allowed("https://app.example.com:443"))
        self.assertTrue(origin_allowed("https://App.Example.com"))

    def test_another_port_scheme_or_host_is_refused(self) -> None:
        for origin in [
            "http://localhost:8001",
            "https://127.0.0.1:8000",
            "http://127.0.0.2:8000",
            "http://app.example.com",
            "https://app.example.com:8443",
            "https://evil.example.com",
            "https://app.example.com.evil.example",
            "null",
            "",
            None,
            "http://127.0.0.1:notaport",
            "http://127.0.0.1:8000/path",
        ]:
            with self.subTest(origin=origin):
                self.assertFalse(origin_allowed(origin))
