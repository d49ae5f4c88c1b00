"""Guards on the parts of django-oauth-toolkit this project uses beyond its public API."""

import inspect
from unittest import mock

import oauth2_provider
from django.test import SimpleTestCase, override_settings
from oauth2_provider import cimd as dot_cimd
from oauth2_provider.oauth2_validators import OAuth2Validator

from authserver import cimd_loopback
from authserver.fetching import HardenedFetcher
from common import internals


class PrivateApiGuardTest(SimpleTestCase):
    """Fails on a DOT upgrade until someone re-reads the private names we call."""

    def test_dot_is_the_version_the_private_calls_were_checked_against(self) -> None:
        self.assertIn(
            oauth2_provider.__version__,
            internals.CHECKED[internals.DOT],
            "django-oauth-toolkit changed: re-check authserver/cimd_loopback.py and "
            "CodexOAuth2Validator._check_and_set_request_resource (common/internals.py lists them), "
            "then add the version to common.internals.CHECKED",
        )

    def test_the_private_names_still_exist_with_the_shapes_we_call(self) -> None:
        self.assertEqual(list(inspect.signature(dot_cimd._validate_client_id_url).parameters), ["client_id"])
        self.assertEqual(
            list(inspect.signature(dot_cimd.SafeMetadataFetcher._read_document).parameters), ["self", "response"]
        )
        self.assertEqual(
            list(inspect.signature(OAuth2Validator._check_and_set_request_resource).parameters), ["self", "request"]
        )


class LoopbackFetcherTest(SimpleTestCase):
    """Documents and key sets alike (``authserver.fetching``)."""

    def fetched_by_dot(self, client_id: str, *, allow_loopback: bool) -> bool:
        """Whether DOT's own fetch (not the loopback one) handled ``client_id``."""
        with (
            override_settings(CODEX_CIMD_ALLOW_LOOPBACK=allow_loopback),
            mock.patch.object(dot_cimd.SafeMetadataFetcher, "fetch", return_value=({}, 0)) as dots,
            mock.patch.object(cimd_loopback, "fetch_from_loopback", return_value=({}, 0)) as loopback,
        ):
            HardenedFetcher().fetch(client_id)
        self.assertNotEqual(dots.called, loopback.called)
        return dots.called

    def test_without_the_setting_a_loopback_client_id_gets_dots_own_fetch(self) -> None:
        self.assertTrue(self.fetched_by_dot("https://127.0.0.1:8443/client.json", allow_loopback=False))

    def test_a_public_client_id_always_gets_dots_own_fetch(self) -> None:
        self.assertTrue(self.fetched_by_dot("https://client.example.com/client.json", allow_loopback=True))

    def test_with_the_setting_a_loopback_client_id_is_fetched_locally(self) -> None:
        self.assertFalse(self.fetched_by_dot("https://localhost:8443/client.json", allow_loopback=True))
