"""What this server keeps about OAuth clients beyond django-oauth-toolkit's own tables."""

from django.conf import settings
from django.db import models
from oauth2_provider.settings import oauth2_settings


class ClientKeys(models.Model):
    """The public keys of a client named by a metadata document that authenticates with
    ``private_key_jwt`` (RFC 7523 §2.2), as its document last declared them.

    DOT's Application has no place for them (its metadata-document support knows only public
    clients), so they are kept here, by client id, and written whenever the document is
    fetched (``authserver.clients.cimd``): a document that stops declaring ``private_key_jwt`` removes
    its row, and with it the token endpoint's demand for an assertion. A row without its
    Application is inert: the token endpoint looks here only for a client it has loaded.
    """

    client_id = models.CharField(max_length=255, unique=True)
    # Exactly one of the two: where the key set is served, or the key set itself.
    jwks_uri = models.CharField(max_length=2048, blank=True)
    jwks = models.JSONField(null=True, blank=True)
    # token_endpoint_auth_signing_alg, when the document names one: the only algorithm accepted.
    signing_algorithm = models.CharField(max_length=16, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(jwks_uri="") & models.Q(jwks__isnull=False))
                | (~models.Q(jwks_uri="") & models.Q(jwks__isnull=True)),
                name="authserver_clientkeys_one_key_source",
            )
        ]

    def __str__(self) -> str:
        return self.client_id


class PendingRegistration(models.Model):
    """A client registered through Dynamic Client Registration that no person has approved yet.

    What a flood of registrations costs is what it leaves behind, so this is what is bounded
    (``authserver.clients.registration``): a registration nobody approves is removed, Application,
    registration token and all, once it is ``CODEX_DCR_PENDING_SECONDS`` old, and at most
    ``CODEX_DCR_PENDING_PER_ADDRESS`` of them per client address (``CODEX_DCR_PENDING_MAX`` in
    all) wait at once. The row goes when a person first approves the client: from then on the
    client is that person's to keep or revoke. A hosted client that registers for each person
    it connects, each followed by that person's sign-in, holds only the few registrations of
    the last minutes at any time.
    """

    application = models.OneToOneField(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    address = models.CharField(max_length=64)  # the registering client's, as common.ratelimit reads it
    registered_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["address", "registered_at"], name="authserver_pending_by_address"),
            models.Index(fields=["registered_at"], name="authserver_pending_by_age"),
        ]

    def __str__(self) -> str:
        return f"{self.application_id} from {self.address}"


class ClientUse(models.Model):
    """When an application last called a tool on a person's codex, to the minute
    (``authserver.core.last_used``: counted in memory, written at most once a minute per
    application and person, never once per call)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+")
    last_used = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "application"], name="authserver_clientuse_one_per_person_and_client"
            )
        ]

    def __str__(self) -> str:
        return f"{self.application_id} for {self.user_id}"


class SpentJti(models.Model):
    """A one-use JWT that was used: its issuer and ``jti``, kept until the JWT expires.

    ``authserver.core.replay`` writes it (insert first: the unique ``key`` decides which of two
    concurrent uses is the first) and refuses any later use of the same pair while the row
    lives; a row whose ``expires_at`` has passed guards nothing (the JWT it guarded is refused
    for its age) and is swept. A table rather than a cache: a row is never evicted before it
    expires, whatever else is written, and a database that cannot be read or written refuses
    the JWT. Client assertions (``private_key_jwt``) are kept here; any other one-use JWT (an
    identity assertion grant's, say) takes a namespace of its own in ``key``.
    """

    # sha256 of (namespace, issuer, jti): one fixed-width column for any lengths.
    key = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key[:12]}… until {self.expires_at:%Y-%m-%d %H:%M:%S}"


class AttemptCount(models.Model):
    """How many attempts one counter of ``authserver.core.attempts`` holds in one window of time:
    failed client authentications per client network, per client, per client and network.

    ``attempts`` reserves a unit with one conditional ``UPDATE ... SET count = count + 1 WHERE
    count < limit`` before the work it bounds (a password hash), so concurrent attempts queue on
    the row and no more than ``limit`` pass, and gives it back when the attempt succeeds. A table
    rather than a cache entry for the reason ``SpentJti`` is one: a row is never evicted before
    its window ends, and a database that cannot be written refuses the attempt."""

    # sha256 of (counter, window start): one fixed-width column for any counter name.
    key = models.CharField(max_length=64, unique=True)
    count = models.PositiveIntegerField()
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key[:12]}…: {self.count} until {self.expires_at:%Y-%m-%d %H:%M:%S}"


class HeadlessAgent(models.Model):
    """A program a person runs with no one at the keyboard, which gets tokens for that person's
    codex with the client-credentials grant (the MCP OAuth Client Credentials extension).

    Each agent is its own DOT Application (confidential, grant type client-credentials, owned by
    the person), made on the person's account page (``authserver.clients.agents``). It proves who it is
    with a secret stored hashed (DOT's ``hash_client_secret``) or with ``private_key_jwt`` against
    the public keys the person gave (a ``ClientKeys`` row, as a metadata document's client has).
    The token endpoint serves ``client_credentials`` to exactly the applications of agents that
    are not revoked (``authserver.oauth.validators``); a revoked agent keeps its row, so that the notes
    it wrote still name it, but its application can no longer authenticate.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="headless_agents")
    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="headless_agent"
    )
    name = models.CharField(max_length=100)
    # Space-separated, as DOT keeps a token's: what any token of this agent may hold at most.
    scopes = models.CharField(max_length=255)
    created = models.DateTimeField()
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "revoked"], name="authserver_agent_by_owner")]
        constraints = [
            models.CheckConstraint(condition=~models.Q(scopes=""), name="authserver_headlessagent_has_scopes"),
            models.CheckConstraint(
                condition=models.Q(revoked__isnull=True) | models.Q(revoked__gte=models.F("created")),
                name="authserver_headlessagent_revoked_after_created",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.application_id}) for {self.owner_id}"

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()


class OrganizationGrant(models.Model):
    """An application a person's organization let use their notebook: the latest ID-JAG its IdP
    (``issuer``) signed for them and this client (``authserver.enterprise.id_jag``). Connected applications
    marks the application "granted by your organization"; revoking it there removes this row
    with the tokens (``authserver.core.revocation.access_revoke``). Nothing the client sent is kept here:
    the row is written in the transaction that issues the token, never for a refused ID-JAG."""

    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    issuer = models.CharField(max_length=2048)
    granted_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["application", "user"], name="authserver_organizationgrant_one_per_person_and_client"
            )
        ]

    def __str__(self) -> str:
        return f"{self.application_id} for {self.user_id} by {self.issuer}"


class CodeRedemption(models.Model):
    """An authorization code that was exchanged, and what it issued: the access token and the
    refresh token family (DOT's ``RefreshToken.token_family``, which every rotation keeps).

    Written in the transaction that spends the code and issues its tokens
    (``authserver.core.exchange``), and kept while a second use of the code matters: its
    lifetime and a margin. A second use in that time is refused and revokes what the first use
    issued (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2), and the row goes with it; a row past
    ``expires_at`` guards nothing and is swept. The code itself is never kept, only its SHA-256.
    """

    key = models.CharField(max_length=64)
    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # By id, not a foreign key: a rotation or a revocation deletes the token without touching this row.
    access_token_id = models.BigIntegerField(null=True)
    token_family = models.UUIDField(null=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key"], name="authserver_coderedemption_one_per_code")]
        indexes = [models.Index(fields=["expires_at"], name="authserver_redemption_by_age")]

    def __str__(self) -> str:
        return f"{self.key[:12]}… of {self.application_id} for {self.user_id}"
