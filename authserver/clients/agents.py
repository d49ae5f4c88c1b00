"""Headless agents (the MCP OAuth Client Credentials extension): a person makes one on their
account page, and it gets tokens for their codex with ``grant_type=client_credentials``.

An agent is a ``HeadlessAgent`` row and its own DOT Application: confidential, grant type
client-credentials, owned by the person, with no redirect URI (it never sees a consent page).
It authenticates at the token endpoint in one of two ways, chosen when it is made:

- ``private_key_jwt`` (RFC 7523 §2.2, what the extension recommends): the person gives the
  agent's public key, as a JWKS or a PEM public key. It is kept as a metadata document's client
  keeps its keys (a ``ClientKeys`` row with the set inline), and the assertion is checked by the
  same code (``authserver.clients.assertions``). The application holds no secret (an empty stored
  secret matches nothing, ``CodexOAuth2Validator._check_secret``).
- a client secret (``client_secret_basic`` or ``client_secret_post``): made here, shown to the
  person once, and stored only as DOT stores a hashed secret (``hash_client_secret``, the
  ``CLIENT_SECRET_HASHER``).

Revoking an agent ends it at once: in one transaction its row is marked revoked, its
application loses its secret and keys (so it can no longer authenticate), and its tokens are
deleted (``authserver.core.revocation.access_revoke``: the next tool call gets 401). The row stays, so
that the notes it wrote still name it. When its person is shut out (deactivated, deprovisioned,
leaving), every agent of theirs is revoked so (``agents_revoke``): reactivating them brings no
agent back, as it brings no token back. Until then, an agent whose owner may not hold tokens gets
none (``authserver.core.tokens.person_may_hold_tokens``, asked under the owner's lock as the token
is issued), and none is made for them.

Locks, in the order every issuance and revocation takes them: the person's row
(``authserver.core.tokens.person_lock``), then the agent's.
"""

from dataclasses import dataclass

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import get_application_model

from authserver.clients.key_sets import key_set_problem
from authserver.core.revocation import Revoked, access_revoke
from authserver.core.scopes import ALL_SCOPES
from authserver.core.tokens import PersonShutOut, person_hold, person_lock
from authserver.models import ClientKeys, HeadlessAgent
from common.audit import audit
from common.inputs import JSONRefused, json_document, name_problem, text_problem

NAME_MAX_CHARS = HeadlessAgent._meta.get_field("name").max_length
PUBLIC_KEY_MAX_CHARS = 16_384
# How the agent authenticates, as the audit line and the page say it.
PRIVATE_KEY_JWT = "private_key_jwt"
CLIENT_SECRET = "client_secret"


class AgentRefused(Exception):
    """Why an agent cannot be made as asked: a sentence for the person, shown on the page."""


@dataclass(frozen=True)
class CreatedAgent:
    agent: HeadlessAgent
    client_id: str
    # The secret, for the one page that shows it; None for an agent that signs with its key.
    secret: str | None


def live_agents(*, owner: AbstractBaseUser):
    """The person's agents that are not revoked, newest first."""
    return HeadlessAgent.objects.filter(owner=owner, revoked__isnull=True).order_by("-created", "-pk")


def live_agent_of(application: object) -> HeadlessAgent | None:
    """The agent an application belongs to when that agent is not revoked, else None."""
    pk = getattr(application, "pk", None)
    if pk is None:
        return None
    return HeadlessAgent.objects.filter(application_id=pk, revoked__isnull=True).select_related("owner").first()


def is_agent_application(application: object) -> bool:
    """Whether an application is a headless agent's (revoked or not)."""
    pk = getattr(application, "pk", None)
    return pk is not None and HeadlessAgent.objects.filter(application_id=pk).exists()


def _jwk_of_pem(text: str) -> dict:
    try:
        key = serialization.load_pem_public_key(text.encode("utf-8"))
    except (ValueError, TypeError, UnicodeError):
        raise AgentRefused(
            "The public key is neither a JSON Web Key Set nor a PEM public key (“-----BEGIN PUBLIC KEY-----” …)."
        ) from None
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < 2048:
            raise AgentRefused(f"The RSA key has {key.key_size} bits; use at least 2048.")
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key, as_dict=True)
    elif isinstance(key, ec.EllipticCurvePublicKey):
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(key, as_dict=True)
    else:
        raise AgentRefused("The public key must be an RSA or an elliptic-curve (P-256, P-384, P-521) key.")
    return {"keys": [{**jwk, "use": "sig"}]}


def parse_public_key(text: str) -> dict:
    """The JSON Web Key Set a person pasted (a JWKS, or one PEM public key), or ``AgentRefused``."""
    text = text.strip()
    # Free text (a PEM key has line breaks), of at most PUBLIC_KEY_MAX_CHARS characters.
    if problem := text_problem(text, max_chars=PUBLIC_KEY_MAX_CHARS, what="The public key", controls=True):
        raise AgentRefused(problem + ".")
    if "PRIVATE KEY" in text:
        # Never kept, never echoed: the person should make a new key, as this one has been shown.
        raise AgentRefused(
            "That is a private key. Paste only the public key; keep the private key with the agent "
            "(and, as it has left the agent now, consider making a new pair)."
        )
    if text.startswith("-----BEGIN"):
        return _jwk_of_pem(text)
    try:
        jwks = json_document(text)
    except JSONRefused as refused:
        if text.startswith(("{", "[")):
            raise AgentRefused(f"The key set cannot be read: {refused.problem}.") from None
        raise AgentRefused(
            "The public key is neither a JSON Web Key Set nor a PEM public key (“-----BEGIN PUBLIC KEY-----” …)."
        ) from None
    if isinstance(jwks, dict) and "kty" in jwks and "keys" not in jwks:
        jwks = {"keys": [jwks]}  # one JSON Web Key: a set of one
    if problem := key_set_problem(jwks):
        raise AgentRefused("The key set cannot be used: " + problem.replace('its "jwks"', "it") + ".")
    for key in jwks["keys"]:
        # What signed_jwt.SIGNING_ALGORITHMS can verify: RSA and elliptic-curve keys.
        if key["kty"] not in {"RSA", "EC"}:
            raise AgentRefused(f"A key of the set has kty {key['kty'][:10]!r}; use an RSA or an elliptic-curve key.")
        try:
            public = jwt.PyJWK(key).key
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as error:
            raise AgentRefused(f"A key of the set is not a public signing key this server can use ({error}).") from None
        if isinstance(public, rsa.RSAPublicKey) and public.key_size < 2048:
            raise AgentRefused(f"An RSA key of the set has {public.key_size} bits; use at least 2048.")
    return jwks


@transaction.atomic
def agent_create(
    *, owner: AbstractBaseUser, name: str, scopes: list[str], public_key: str | None = None
) -> CreatedAgent:
    """Make a headless agent for ``owner``: with ``public_key`` (a JWKS or a PEM public key) it
    authenticates with ``private_key_jwt``, without it with a new secret (returned once, stored
    hashed). ``AgentRefused`` says why not (a person who may not hold tokens among the reasons), and
    nothing is written then.

    At most ``CODEX_AGENTS_PER_PERSON`` live agents per person, also under concurrent requests: the
    person's row is locked while they are counted."""
    name = name.strip()
    if problem := name_problem(name, max_chars=NAME_MAX_CHARS, what="The name"):
        raise AgentRefused(problem + ".")
    if not name:
        raise AgentRefused("Give the agent a name, so that you know it in Connected applications.")
    scopes = sorted(set(scopes))
    if not scopes or not set(scopes) <= set(ALL_SCOPES):
        raise AgentRefused(f"Choose what the agent may do: {' and/or '.join(ALL_SCOPES)}.")
    jwks = parse_public_key(public_key) if public_key and public_key.strip() else None
    # Serialises this person's creations (a no-op lock on SQLite, whose writes are serial anyway),
    # and their shutting out: an agent is made for a person who may hold tokens, or not at all.
    try:
        person_hold(user_id=owner.pk)
    except PersonShutOut:
        raise AgentRefused("Your account is deactivated on this server: no agent can be made for it.") from None
    if live_agents(owner=owner).count() >= settings.CODEX_AGENTS_PER_PERSON:
        raise AgentRefused(
            f"You have {settings.CODEX_AGENTS_PER_PERSON} headless agents, as many as this server allows "
            "one person. Revoke one you no longer use under Connected applications first."
        )
    Application = get_application_model()
    secret = None if jwks is not None else generate_client_secret()
    application = Application.objects.create(
        name=name,
        user=owner,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        redirect_uris="",
        # A key-signing agent holds no secret: an empty stored secret matches nothing
        # (CodexOAuth2Validator._check_secret), where a hash of "" would match an empty one.
        client_secret=secret or "",
        hash_client_secret=secret is not None,
    )
    if jwks is not None:
        ClientKeys.objects.create(client_id=application.client_id, jwks=jwks)
    agent = HeadlessAgent.objects.create(
        owner=owner, application=application, name=name, scopes=" ".join(scopes), created=timezone.now()
    )
    method = PRIVATE_KEY_JWT if jwks is not None else CLIENT_SECRET
    transaction.on_commit(
        lambda: audit(
            "agent.created",
            user_id=owner.pk,
            client_id=application.client_id,
            scopes=scopes,
            authentication=method,
        )
    )
    return CreatedAgent(agent=agent, client_id=application.client_id, secret=secret)


@transaction.atomic
def agent_revoke(*, agent: HeadlessAgent, by: str = "person") -> bool:
    """Revoke a headless agent: it can no longer authenticate, and its tokens are deleted (the
    next tool call gets 401). False if it was revoked already. Its owner's row is locked first and
    then the agent's, as a token being issued for it takes them (the owner's in
    ``exchange.grant_hold``, the agent's in ``CodexOAuth2Validator._create_access_token``), so that
    such a token either is deleted here or is refused there."""
    return _agent_end(agent, by) is not None


@transaction.atomic
def agents_revoke(*, owner: AbstractBaseUser, by: str) -> int:
    """Revoke every live headless agent of ``owner``, each as ``agent_revoke`` revokes one (its
    own ``token.revoked`` and ``agent.revoked`` lines, ``by``): what a person's shutting out does
    (``authserver.people.leaving.shut_out``, ``authserver.signals``). Returns the tokens deleted.

    Under the owner's lock, taken first, so that no agent is made meanwhile (``agent_create``)
    and none is left live."""
    person_lock(user_id=owner.pk)
    rows = 0
    for agent in live_agents(owner=owner):
        ended = _agent_end(agent, by)
        rows += ended.rows if ended is not None else 0
    return rows


def _agent_end(agent: HeadlessAgent, by: str) -> Revoked | None:
    """``agent_revoke``'s work, in its transaction: what was revoked, None if it was already."""
    person_lock(user_id=agent.owner_id)  # an agent's owner never changes
    agent = HeadlessAgent.objects.select_for_update().select_related("application", "owner").get(pk=agent.pk)
    if agent.revoked is not None:
        return None
    agent.revoked = timezone.now()
    agent.save(update_fields=["revoked"])
    application = agent.application
    application.client_secret = ""
    application.hash_client_secret = False
    application.save(update_fields=["client_secret", "hash_client_secret"])
    ClientKeys.objects.filter(client_id=application.client_id).delete()
    revoked = access_revoke(user=agent.owner, application=application, by=by)
    # Ids only: the agent's name is the person's words, which the log does not carry.
    owner_id, client_id = agent.owner_id, application.client_id
    transaction.on_commit(lambda: audit("agent.revoked", user_id=owner_id, client_id=client_id, by=by))
    return revoked
