"""Guards on the parts of django-oauth-toolkit this project uses beyond its public API, and the
loopback exception of the fetcher (``authserver.clients.fetching``)."""

import inspect

import oauth2_provider
from django.test import SimpleTestCase, override_settings
from oauth2_provider import cimd as dot_cimd
from oauth2_provider.cimd import CIMDError
from oauth2_provider.oauth2_validators import OAuth2Validator

from authserver.clients.fetching import HardenedFetcher
from common import internals
from tests.loopback_http import DocumentsServer


class PrivateApiGuardTest(SimpleTestCase):
    """Fails on a DOT upgrade until someone re-reads the private names we call."""

    def test_dot_is_the_version_the_private_calls_were_checked_against(self) -> None:
        self.assertIn(
            oauth2_provider.__version__,
            internals.CHECKED[internals.DOT],
            "django-oauth-toolkit changed: re-check authserver/clients/fetching.py and CodexOAuth2Validator's "
            "overrides (common/internals.py lists them), then add the version to common.internals.CHECKED",
        )

    def test_the_private_names_still_exist_with_the_shapes_we_call(self) -> None:
        self.assertEqual(list(inspect.signature(dot_cimd._validate_client_id_url).parameters), ["client_id"])
        self.assertEqual(list(inspect.signature(dot_cimd._resolve_and_validate).parameters), ["hostname", "port"])
        self.assertEqual(list(inspect.signature(dot_cimd._effective_max_age).parameters), ["cache_control"])
        for name, parameters in {
            "_check_and_set_request_resource": ["self", "request"],
            "_load_application": ["self", "client_id", "request"],
            "_check_secret": ["self", "provided_secret", "stored_secret"],
        }.items():
            with self.subTest(name):
                self.assertEqual(list(inspect.signature(getattr(OAuth2Validator, name)).parameters), parameters)


class LoopbackFetcherTest(SimpleTestCase):
    """Documents and key sets alike (``authserver.clients.fetching``): a loopback address is fetched only
    with the development setting on, and then without a certificate check."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.server = cls.enterClassContext(DocumentsServer())
        cls.server.documents["/client.json"] = {"client_id": "x"}

    def test_without_the_setting_a_loopback_address_is_refused_before_connecting(self) -> None:
        before = self.server.fetched.get("/client.json", 0)
        with override_settings(CODEX_CIMD_ALLOW_LOOPBACK=False), self.assertRaisesMessage(CIMDError, "non-public"):
            HardenedFetcher().fetch(self.server.origin + "/client.json")
        self.assertEqual(self.server.fetched.get("/client.json", 0), before)

    def test_with_the_setting_a_loopback_address_is_fetched_despite_its_certificate(self) -> None:
        with override_settings(CODEX_CIMD_ALLOW_LOOPBACK=True):
            document, _max_age = HardenedFetcher().fetch(self.server.origin + "/client.json")
        self.assertEqual(document, {"client_id": "x"})

    def test_with_the_setting_a_public_name_is_still_checked_as_production_checks_it(self) -> None:
        with override_settings(CODEX_CIMD_ALLOW_LOOPBACK=True), self.assertRaises(CIMDError):
            HardenedFetcher().fetch("https://client.invalid/client.json")
