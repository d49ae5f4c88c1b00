"""django-oauth-toolkit's request validator, pinned to this server's one resource, with
``private_key_jwt`` for clients whose metadata document declares it.

RFC 8707 audience binding: every grant and token is bound to exactly
``CODEX_RESOURCE_URL``. A request without ``resource`` is pinned to it; any other
resource is refused with ``invalid_target``. PKCE must use S256: a ``plain`` or
missing method is refused before the consent page is shown.
"""

import logging
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db import transaction
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from authserver import cimd, client_assertions, registration
from authserver.id_jag import GRANT_TYPE as JWT_BEARER
from authserver.ratelimit import network_of

logger = logging.getLogger(__name__)


def _network_of(request) -> str | None:
    """The client network of an oauthlib request (DOT hands the request's META as its headers)."""
    address = (getattr(request, "headers", None) or {}).get("REMOTE_ADDR")
    return network_of(address) if address else None


def _foreign_target(resources: list[str], request) -> errors.CustomOAuth2Error | None:
    foreign = [value for value in resources if value != settings.CODEX_RESOURCE_URL]
    if not foreign:
        return None
    return errors.CustomOAuth2Error(
        error="invalid_target",
        description=f"This server issues tokens only for the resource {settings.CODEX_RESOURCE_URL}",
        request=request,
        status_code=400,
    )


def _as_list(value) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return value.split()
    return [item for item in value if item]


class RegistrationExpiredError(errors.FatalClientError):
    """The person approved a client whose registration expired first: shown on the page (400),
    never sent to the client's redirect URI."""

    error = "invalid_client"
    status_code = 400
    description = (
        "This application's registration expired before anyone approved it; start again from the "
        "application, which registers anew"
    )


# The grants the metadata advertises; tokens for headless agents are minted directly
# (authserver.tokens.mint_access_token), never through a grant. JWT_BEARER: an ID-JAG
# (authserver.id_jag), served to any client that authenticates as registered.
SERVED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token", JWT_BEARER})


class CodexOAuth2Validator(OAuth2Validator):
    # --- client authentication: private_key_jwt (authserver.client_assertions) ---------------
    # oauthlib asks client_authentication_required first, then authenticate_client (or, when
    # not required, authenticate_client_id), on the token and the revocation endpoints.

    def client_authentication_required(self, request, *args, **kwargs):
        if client_assertions.presented(request) or self._client_keys(request.client_id) is not None:
            return True
        return super().client_authentication_required(request, *args, **kwargs)

    def authenticate_client(self, request, *args, **kwargs):
        client_id = request.client_id or client_assertions.claimed_client_id(getattr(request, "client_assertion", None))
        keys = self._client_keys(client_id)
        if keys is None and not client_assertions.presented(request):
            return super().authenticate_client(request, *args, **kwargs)
        try:
            if keys is None:
                raise client_assertions.AssertionRefused(
                    "this client does not authenticate with private_key_jwt (its metadata document declares no keys)"
                )
            # Loads the client, and fetches its document again when DOT's copy is stale: the
            # keys are read after it, as that document declares them.
            if not self.validate_client_id(client_id, request):
                raise client_assertions.AssertionRefused("the client's metadata document could not be used")
            keys = self._client_keys(client_id)
            if keys is None:
                raise client_assertions.AssertionRefused("the client's metadata document no longer declares keys")
            client_assertions.authenticate(
                client_id=client_id,
                keys=keys,
                assertion_type=getattr(request, "client_assertion_type", None),
                assertion=getattr(request, "client_assertion", None),
                endpoint=urlsplit(request.uri).path.removeprefix("/o/"),
                now=client_assertions.now(),
                network=_network_of(request),
            )
        except client_assertions.AssertionRefused as refused:
            logger.warning("client assertion refused for %r: %s", (client_id or "")[:255], refused)
            raise errors.InvalidClientError(description=str(refused), request=request) from None
        request.client_id = client_id
        return True

    def _check_secret(self, provided_secret, stored_secret):
        # A private DOT hook (registered in common.internals): a public client is saved with no
        # secret (authserver.signals), and an empty stored secret matches nothing.
        if not stored_secret:
            return False
        return super()._check_secret(provided_secret, stored_secret)

    # --- loading clients: metadata documents are fetched only where a limit is counted ---------

    def _load_application(self, client_id, request):
        # A private DOT hook (registered in common.internals). DOT would fetch the document of any
        # client id it does not know, at any endpoint, and make an application of it. Here an
        # unknown document is answered as an unknown client (invalid_client) and fetches nothing:
        # only the authorization endpoint fetches one, under its limit (authserver.views). A known
        # client's copy past its lifetime is fetched again, under the fetch slots and deadline.
        loaded = getattr(request, "client", None)
        already = loaded is not None and getattr(loaded, "client_id", None) == client_id
        if not already and isinstance(client_id, str) and is_cimd_client_id(client_id):
            application = cimd.known_application(client_id)
            if application is None:
                return None
            cimd.refresh_if_stale(application, network=_network_of(request))
        return super()._load_application(client_id, request)

    @staticmethod
    def _client_keys(client_id):
        if not isinstance(client_id, str) or not client_id:
            return None
        return client_assertions.keys_of(client_id)

    # --- scopes -------------------------------------------------------------------------------

    def validate_scopes(self, client_id, scopes, client, request, *args, **kwargs):
        # oauthlib splits "scope=" (sent by ChatGPT, among others) into [""], an unknown scope.
        # An empty scope is an absent one (RFC 6749 §3.3 leaves the default to the server), and
        # an empty token between two spaces is no scope: what is asked for is what remains.
        asked = [scope for scope in scopes if scope]
        if not asked:
            asked = self.get_default_scopes(client_id, request, *args, **kwargs)
        request.scopes = asked
        return super().validate_scopes(client_id, asked, client, request, *args, **kwargs)

    # --- grants -------------------------------------------------------------------------------

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs):
        # Whatever grant a client was registered with (an old DCR client, an admin edit),
        # the token endpoint serves only the advertised grants.
        if grant_type not in SERVED_GRANT_TYPES:
            return False
        if grant_type == JWT_BEARER:
            # DOT's Application has one grant type and no jwt-bearer among them: any client may
            # present an ID-JAG, which its IdP issued to it by client_id (checked with it).
            return True
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs):
        # Called for authorization requests once the client and redirect URI are known
        # good, so the errors below are redirected back to the client (with state and iss).
        if request.code_challenge is not None and request.code_challenge_method != "S256":
            raise errors.InvalidRequestError(description='PKCE code_challenge_method must be "S256"', request=request)
        query_resources = parse_qs(urlsplit(request.uri).query).get("resource", [])
        if error := _foreign_target(query_resources + _as_list(getattr(request, "resource", None)), request):
            raise error
        return super().validate_response_type(client_id, response_type, client, request, *args, **kwargs)

    def save_authorization_code(self, client_id, code, request, *args, **kwargs):
        resources = _as_list(getattr(request, "resource", None))
        if error := _foreign_target(resources, request):
            raise error
        request.resource = [settings.CODEX_RESOURCE_URL]
        # The person approved: a registration still waiting for that is now theirs, in the
        # same transaction as the grant (authserver.registration).
        with transaction.atomic():
            try:
                registration.claim_on_approval(request.client)
            except registration.RegistrationExpired:
                raise RegistrationExpiredError(request=request) from None
            return super().save_authorization_code(client_id, code, request, *args, **kwargs)

    def _check_and_set_request_resource(self, request) -> None:
        # A private DOT hook (pinned: django-oauth-toolkit==3.4.1; tests/test_cimd.py fails
        # on another version): the token endpoint's resource handling for every grant type.
        super()._check_and_set_request_resource(request)
        if error := _foreign_target(request.resource, request):
            raise error
        request.resource = [settings.CODEX_RESOURCE_URL]
