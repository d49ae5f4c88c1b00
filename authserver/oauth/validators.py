"""django-oauth-toolkit's request validator, pinned to this server's one resource, with one
client authentication for every endpoint (``authserver.clients.authentication``: secrets,
``private_key_jwt``, public clients), and the client-credentials grant for people's headless
agents only (``authserver.clients.agents``).

RFC 8707 audience binding: every grant and token is bound to exactly
``CODEX_RESOURCE_URL``. A request without ``resource`` is pinned to it; any other
resource is refused with ``invalid_target``. PKCE must use S256: a ``plain`` or
missing method is refused before the consent page is shown.
"""

import json
import logging
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db import transaction
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from authserver.clients import agents, authentication, cimd, registration
from authserver.core import exchange, policy
from authserver.core.token_check import token_checksum
from authserver.core.tokens import PersonShutOut
from authserver.enterprise import id_jag
from authserver.enterprise.id_jag import GRANT_TYPE as JWT_BEARER
from authserver.models import HeadlessAgent
from common.audit import audit
from common.ratelimit import oauthlib_client_network as _network_of

logger = logging.getLogger(__name__)


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


# The grants the metadata advertises. client_credentials is served to the applications of
# people's live headless agents and to no other client (validate_grant_type); JWT_BEARER, an
# ID-JAG (authserver.enterprise.id_jag), to any other client that authenticates as registered and
# may present one (a confidential one, unless the policy lets public clients in); an
# operator's token is minted directly (authserver.core.tokens.mint_access_token), never through a grant.
SERVED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token", "client_credentials", JWT_BEARER})
CLIENT_CREDENTIALS = "client_credentials"


class AgentRevokedError(errors.InvalidClientError):
    """The agent was revoked while its token was being issued: no token."""

    description = "This headless agent was revoked by its owner"


class CodexOAuth2Validator(OAuth2Validator):
    # --- client authentication: one function for every endpoint (authserver.clients.authentication)
    # oauthlib asks client_authentication_required first, then authenticate_client (or, when not
    # required, authenticate_client_id), at the token and revocation endpoints; DOT's introspection
    # view calls authenticate_client. Authentication is always "required" here, so that every
    # request reaches the one function, which tells a public client (method none) apart itself.

    def client_authentication_required(self, request, *args, **kwargs):
        return True

    def authenticate_client(self, request, *args, **kwargs):
        """The client the request authenticated as (``request.client``), or an oauthlib error
        saying why not: ``authentication.client_authenticate`` decides, from what it verified."""
        try:
            presented = authentication.Presented.of(
                authorization=request.headers.get("HTTP_AUTHORIZATION"),
                param=lambda name: getattr(request, name, None),
            )
        except authentication.MalformedAuthorization as malformed:
            raise errors.InvalidRequestError(description=str(malformed), request=request) from None
        authenticated = authentication.client_authenticate(
            presented=presented,
            endpoint=urlsplit(request.uri).path.removeprefix("/o/"),
            network=_network_of(request) or "unknown",
            load=lambda client_id: self._load_application(client_id, request),
            check_secret=self._check_secret,
            grant_type=getattr(request, "grant_type", None),
        )
        request.client = authenticated.application
        request.client_id = authenticated.application.client_id
        return True

    def authenticate_client_id(self, client_id, request, *args, **kwargs):
        # Not reached while client_authentication_required says True; the same door if it is.
        return self.authenticate_client(request, *args, **kwargs)

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
        # only the authorization endpoint fetches one, under its limit (authserver.oauth.views). A known
        # client's copy past its lifetime is fetched again, under the fetch slots and deadline.
        loaded = getattr(request, "client", None)
        already = loaded is not None and getattr(loaded, "client_id", None) == client_id
        if not already and isinstance(client_id, str) and is_cimd_client_id(client_id):
            if not policy.cimd_host_allowed(client_id) and urlsplit(request.uri or "").path.endswith("/token/"):
                # The operator's policy, at the token endpoint too: a client whose document's host
                # is no longer allowed gets no new token (a refresh included). Revoking its
                # tokens stays open to it; the authorization endpoint refuses it with its page.
                words = policy.cimd_refusal_words(client_id)
                policy.refused(policy.CIMD_HOSTS, client_id=client_id, reason=words)
                raise errors.InvalidClientError(
                    description=f"Refused by the operator's policy: {words}", request=request
                )
            application = cimd.known_application(client_id)
            if application is None:
                return None
            cimd.refresh_if_stale(application, network=_network_of(request))
        return super()._load_application(client_id, request)

    # --- scopes -------------------------------------------------------------------------------

    def validate_scopes(self, client_id, scopes, client, request, *args, **kwargs):
        # oauthlib splits "scope=" (sent by ChatGPT, among others) into [""], an unknown scope.
        # An empty scope is an absent one (RFC 6749 §3.3 leaves the default to the server), and
        # an empty token between two spaces is no scope: what is asked for is what remains.
        asked = [scope for scope in scopes if scope]
        if not asked:
            asked = self.get_default_scopes(client_id, request, *args, **kwargs)
        request.scopes = asked
        agent = getattr(request, "headless_agent", None)
        if agent is not None and not set(asked) <= set(agent.scope_list):
            # oauthlib answers invalid_scope; the description says what the agent may ask for.
            raise errors.InvalidScopeError(
                description=f"This headless agent may ask only for {' '.join(agent.scope_list)}", request=request
            )
        return super().validate_scopes(client_id, asked, client, request, *args, **kwargs)

    def get_default_scopes(self, client_id, request, *args, **kwargs):
        # A headless agent that names no scope gets all of its own.
        if (agent := getattr(request, "headless_agent", None)) is not None:
            return agent.scope_list
        return super().get_default_scopes(client_id, request, *args, **kwargs)

    # --- grants -------------------------------------------------------------------------------

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs):
        # Whatever grant a client was registered with (an old DCR client, an admin edit, the
        # operator's mint_token application), the token endpoint serves only the advertised
        # grants, and client_credentials only to a live headless agent, which gets nothing else
        # (False: oauthlib answers unauthorized_client).
        if grant_type not in SERVED_GRANT_TYPES:
            return False
        if grant_type == CLIENT_CREDENTIALS:
            agent = agents.live_agent_of(request.client)
            if agent is None:
                return False
            request.headless_agent = agent
        elif agents.is_agent_application(request.client):
            return False
        elif grant_type == JWT_BEARER:
            # DOT's Application has one grant type and no jwt-bearer among them: a client may
            # present an ID-JAG (which its IdP issued to it by client_id, checked with it) as
            # authserver.enterprise.id_jag.client_refusal says, which gives the words.
            if (refusal := id_jag.client_refusal(request.client)) is not None:
                raise errors.UnauthorizedClientError(description=refusal, request=request)
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

    # --- revocation (RFC 7009) by the client: the audit line ------------------------------------

    def revoke_token(self, token, token_type_hint, request, *args, **kwargs):
        """DOT's revocation, and one ``token.revoked`` line (``by="client"``) when the token named
        was one of this client's: found as DOT finds it, by its checksum among the client's own
        tokens. An unknown token (answered 200 all the same, RFC 7009) writes none."""
        application_pk = getattr(request.client, "pk", None)
        found = []
        if application_pk is not None and isinstance(token, str):
            checksum = token_checksum(token)
            for model in (get_access_token_model(), get_refresh_token_model()):
                found += model.objects.filter(
                    token_checksum=checksum, application_id=application_pk, user__isnull=False
                )
        super().revoke_token(token, token_type_hint, request, *args, **kwargs)
        for user_id in sorted({row.user_id for row in found}):
            audit(
                "token.revoked",
                user_id=user_id,
                client_id=request.client.client_id,
                by="client",
                refresh_tokens=sum(isinstance(row, get_refresh_token_model()) for row in found),
                access_tokens=sum(isinstance(row, get_access_token_model()) for row in found),
            )

    # --- token issuance: each grant exchanged at most once (authserver.core.exchange) -----------

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        # DOT reads the code's row anew for each check of the request (the PKCE challenge, its
        # method, the redirect URI): a redemption of the same code that deleted it between two of
        # them made the next read a 500. It is read once, here; the checks below use this copy,
        # and save_bearer_token reads it again under its row's lock before anything is issued.
        grant = get_grant_model().objects.filter(code=code, application=client).select_related("user").first()
        if grant is None:
            # Used already (or never issued): a second use revokes what the first issued.
            exchange.code_replayed(code=code, application=client)
            return False
        if grant.is_expired():
            return False
        request.code_grant = grant
        request.scopes = grant.scope.split(" ")
        request.user = grant.user
        if grant.nonce:
            request.nonce = grant.nonce
        if grant.claims:
            request.claims = json.loads(grant.claims)
        return True

    def get_code_challenge(self, code, request):
        if (grant := getattr(request, "code_grant", None)) is None:
            return super().get_code_challenge(code, request)
        return grant.code_challenge or None

    def get_code_challenge_method(self, code, request):
        if (grant := getattr(request, "code_grant", None)) is None:
            return super().get_code_challenge_method(code, request)
        return grant.code_challenge_method or None

    def confirm_redirect_uri(self, client_id, code, redirect_uri, client, request, *args, **kwargs):
        if (grant := getattr(request, "code_grant", None)) is None:
            return super().confirm_redirect_uri(client_id, code, redirect_uri, client, request, *args, **kwargs)
        return grant.redirect_uri_allowed(redirect_uri)

    def save_bearer_token(self, token, request, *args, **kwargs):
        """DOT's, in a transaction that first takes the person's lock, refusing a person who may
        not hold tokens now, and reads the code or the refresh token again under its own
        (``exchange.grant_hold``), and spends the code with the tokens it issues: a grant exchanged
        meanwhile, or revoked, or whose person was shut out, gets ``invalid_grant`` (a headless
        agent whose owner was: ``unauthorized_client``) and nothing is issued. A code found spent
        here was used twice: what its first use issued is revoked, once this transaction has rolled
        back."""
        code = request.code if request.grant_type == "authorization_code" else None
        refresh_token = request.refresh_token if request.grant_type == "refresh_token" else None
        # DOT sets a headless agent's request.user only in _create_access_token.
        user = None if request.grant_type == CLIENT_CREDENTIALS else getattr(request, "user", None)
        try:
            with transaction.atomic():
                exchange.grant_hold(
                    user_id=self._person_id(request),
                    code=code,
                    application=request.client,
                    refresh_token=refresh_token,
                )
                saved = super().save_bearer_token(token, request, *args, **kwargs)
                if code is not None:
                    exchange.code_redeemed(
                        code=code,
                        application=request.client,
                        user=user,
                        expires=request.code_grant.expires,
                        issued=token,
                    )
                return saved
        except exchange.GrantSpent as spent:
            if code is not None:
                exchange.code_replayed(code=code, application=request.client)
            raise errors.InvalidGrantError(description=str(spent), request=request) from None
        except PersonShutOut:
            raise self._shut_out(request) from None

    @staticmethod
    def _person_id(request) -> int | None:
        """Whom a grant issues for, whose lock it takes first and who must be allowed tokens
        (``exchange.grant_hold``): the person a code, a refresh token or an ID-JAG names, or a
        headless agent's owner (an agent's owner never changes), so that an agent's issuance takes
        the person's lock before the agent's, in the order ``agent_revoke`` takes them."""
        if request.grant_type == CLIENT_CREDENTIALS:
            return getattr(getattr(request, "headless_agent", None), "owner_id", None)
        return getattr(getattr(request, "user", None), "pk", None)

    @staticmethod
    def _shut_out(request) -> errors.OAuth2Error:
        """The refusal of a grant whose person may not hold tokens now (``PersonShutOut``)."""
        if request.grant_type == CLIENT_CREDENTIALS:
            return errors.UnauthorizedClientError(
                description="This headless agent's owner is deactivated on this server, so it gets no token",
                request=request,
            )
        return errors.InvalidGrantError(
            description="The person this grant is for is deactivated on this server, so it gets no token",
            request=request,
        )

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        # Spent already, in the transaction that issued its tokens (save_bearer_token). DOT's
        # deletes it here, after that transaction, which let a second redemption issue tokens
        # in between.
        return None

    def save_authorization_code(self, client_id, code, request, *args, **kwargs):
        resources = _as_list(getattr(request, "resource", None))
        if error := _foreign_target(resources, request):
            raise error
        request.resource = [settings.CODEX_RESOURCE_URL]
        # The person approved: a registration still waiting for that is now theirs, in the
        # same transaction as the grant (authserver.clients.registration).
        with transaction.atomic():
            try:
                registration.claim_on_approval(request.client)
            except registration.RegistrationExpired:
                raise RegistrationExpiredError(request=request) from None
            return super().save_authorization_code(client_id, code, request, *args, **kwargs)

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        # A private DOT hook (registered in common.internals). DOT saves a client-credentials
        # token with no user; a headless agent's acts for its owner's codex. Called inside
        # save_bearer_token's transaction, after its owner's lock (_person_id): the agent's row is
        # read again under the lock that agent_revoke takes after that same person's lock, so a
        # token being issued as the agent is revoked is either refused here or deleted there,
        # never left behind.
        if request.grant_type == CLIENT_CREDENTIALS:
            agent = getattr(request, "headless_agent", None)
            live = agent is not None and (
                HeadlessAgent.objects.select_for_update()
                .filter(pk=agent.pk, revoked__isnull=True, application_id=request.client.pk)
                .values_list("pk", flat=True)
                .first()
                is not None
            )
            if not live:
                raise AgentRevokedError(request=request)
            request.user = agent.owner
        return super()._create_access_token(expires, request, token, source_refresh_token)

    def _check_and_set_request_resource(self, request) -> None:
        # A private DOT hook (pinned: django-oauth-toolkit==3.4.1; tests/test_cimd.py fails
        # on another version): the token endpoint's resource handling for every grant type.
        super()._check_and_set_request_resource(request)
        if error := _foreign_target(request.resource, request):
            raise error
        request.resource = [settings.CODEX_RESOURCE_URL]
