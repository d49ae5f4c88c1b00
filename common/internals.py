"""The register of every use of a Django, django-oauth-toolkit (DOT), MCP SDK, allauth, oauthlib or
urllib3 name outside its documented API: what is used, where, why, and the library versions it was checked against.

The first release that changes one of these can break the product without an error at
import time, so ``tests/test_internals.py`` fails when the installed version of a library
is not one listed in ``CHECKED`` (and when an entry's files no longer hold its name). On an
upgrade: re-read each entry of that library in the new release (its ``where`` files show
how the name is used), fix what changed, then add the version to ``CHECKED``.

To add a use: append an ``Internal`` to ``REGISTER`` (``needle`` is a string each of its
``where`` files must contain, so the entry cannot outlive the code).
"""

from dataclasses import dataclass

DJANGO = "django"
DOT = "django-oauth-toolkit"
MCP = "mcp"
ALLAUTH = "django-allauth"
OAUTHLIB = "oauthlib"
URLLIB3 = "urllib3"

# The installed versions each library's entries were last read against (distribution names).
CHECKED: dict[str, frozenset[str]] = {
    DJANGO: frozenset({"5.2.19"}),
    DOT: frozenset({"3.4.1"}),
    MCP: frozenset({"2.3.0"}),
    ALLAUTH: frozenset({"65.21.1"}),
    OAUTHLIB: frozenset({"4.0.1"}),
    URLLIB3: frozenset({"2.8.0"}),
}


@dataclass(frozen=True)
class Internal:
    library: str  # DJANGO, DOT, MCP, ALLAUTH, OAUTHLIB or URLLIB3
    what: str  # the names used
    where: tuple[str, ...]  # files (from the repository's root) that use them
    needle: str  # a string each of those files holds where it uses them
    why: str


REGISTER: tuple[Internal, ...] = (
    # --- Django: the fast path's driver call (notebook.sql.driver) -------------------------------
    Internal(
        DJANGO,
        "django.db.backends.sqlite3.base.FORMAT_QMARK_REGEX",
        ("notebook/sql/driver.py",),
        "FORMAT_QMARK_REGEX",
        "a statement in the driver's qmark style, converted exactly as SQLiteCursorWrapper.convert_query does",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.close_if_health_check_failed, validate_thread_sharing, "
        "validate_no_broken_transaction, wrap_database_errors, .connection (the driver's connection)",
        ("notebook/sql/driver.py",),
        "wrap_database_errors",
        "the checks and error wrapping Django's cursor makes, kept when a statement bypasses its cursor layers",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.execute_wrappers, queries_logged",
        ("notebook/sql/driver.py", "notebook/transactions.py"),
        "execute_wrappers",
        "whether anything watches the statements (assertNumQueries, DEBUG's log): then Django's own cursor is used",
    ),
    Internal(
        DJANGO,
        "django.db.backends.postgresql.base.TIMESTAMPTZ_OID; Django's timestamptz loader "
        "(psycopg_any.BaseTzLoader: its timezone attribute, and what its load does), BaseDatabaseWrapper.timezone",
        ("notebook/sql/pg_cursor.py",),
        "TIMESTAMPTZ_OID",
        "a psycopg cursor of our own, used only where Django's create_cursor would not register another "
        "time zone loader on its cursor, loads timestamps as Django's loader does, over psycopg's C loader",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.connection (the psycopg connection under Django's wrapper), for psycopg's "
        "ClientCursor.mogrify; CursorWrapper passing the DB-API's nextset through to psycopg's cursor",
        ("notebook/sql/search.py",),
        "ClientCursor(connection.connection)",
        "PostgreSQL's trigram step sends its planner settings and statement as one simple query, "
        "its values written in as Django's client-side binding writes them, and reads the statement's result",
    ),
    # --- Django: a delete that names its codex alone (notebook.services) ------------------------
    Internal(
        DJANGO,
        "QuerySet._raw_delete(using): one DELETE of the queryset's rows, without the collector",
        ("notebook/services.py",),
        "_raw_delete",
        "deleting entries whose rows are gone already sends only their codex's DELETE: the collector would "
        "look for those rows again by entry id alone, a statement that names no codex (docs/capacity.md)",
    ),
    # --- Django: the PostgreSQL backend's health check (codex_site.postgresql) ------------------
    Internal(
        DJANGO,
        "django.db.backends.postgresql.base.DatabaseWrapper subclassed as a backend: "
        "close_if_health_check_failed (overridden), health_check_enabled, health_check_done, pool",
        ("codex_site/postgresql/base.py", "tests/test_postgresql_connections.py"),
        "health_check_done",
        "a quiet idle connection passes the health check without Django's SELECT 1 round trip",
    ),
    Internal(
        DJANGO,
        "DatabaseWrapper._configure_connection (overridden): what init_connection_state and the pool's configure "
        "callback run on each new connection, its return value asking for a commit",
        ("codex_site/postgresql/base.py",),
        "_configure_connection",
        "each session runs without parallel query, set once per connection (Django's own time zone is set there)",
    ),
    # --- Django: a registration's metadata, as DOT's view reads it ------------------------------
    Internal(
        DJANGO,
        "HttpRequest._body (set: what request.body returns once it has been read)",
        ("authserver/clients/registration.py",),
        "request._body = ",
        "RFC 7591 §3.2.1: a registration is registered with the grant types this server serves, and DOT's "
        "registration views read the metadata from request.body alone",
    ),
    # --- Django: model instances and values (notebook.sql.converters, statements) --------------
    Internal(
        DJANGO,
        "Model.__new__ with a hand-made django.db.models.base.ModelState (_state.adding, _state.db)",
        ("notebook/sql/converters.py", "notebook/sql/statements.py", "notebook/sql/writes.py"),
        "_state",
        "instances made as Model.from_db / Model.__init__ make them, without __init__'s per-field walk",
    ),
    Internal(
        DJANGO,
        "identity checks on methods: JSONField.from_db_value, DatabaseOperations.convert_datetimefield_value, "
        "BaseDatabaseOperations.adapt_integerfield_value / adapt_json_value / validate_autopk_value, "
        "SQLite's adapt_datetimefield_value, Model.from_db, Model.__init__",
        ("notebook/sql/converters.py",),
        "__func__",
        "a cheaper converter or preparer is used only where Django's own method is the one in place",
    ),
    Internal(
        DJANGO,
        "connection.ops.get_db_converters(expression) + expression.get_db_converters(connection), "
        "in SQLCompiler.get_converters' order; connection.timezone",
        ("notebook/sql/converters.py", "notebook/sql/search.py"),
        "get_db_converters",
        "results converted exactly as the ORM converts them",
    ),
    Internal(
        DJANGO,
        "Query(model).get_compiler(connection=...).compile(expression.resolve_expression(query))",
        ("notebook/sql/search.py",),
        "get_compiler",
        "the SQL of CAST, SUBSTR and INSTR as the ORM writes them, rendered once per database",
    ),
    Internal(
        DJANGO,
        "connection.ops.lookup_cast, connection.operators['contains'], connection.ops.prep_for_like_query",
        ("notebook/sql/search.py",),
        "lookup_cast",
        "the contains lookup's LIKE with its escaping, as the ORM writes it (PostgreSQL's trigram indexes serve it)",
    ),
    Internal(
        DJANGO,
        "Field.set_cached_value (FieldCacheMixin) on forward and reverse one-to-one/foreign keys",
        ("authserver/core/token_check.py",),
        "set_cached_value",
        "the token's user, codex and application cached on the instances as select_related caches them",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.connection (the psycopg connection under Django's wrapper), for its pgconn's libpq trace",
        ("tests/wire.py",),
        "connection.connection.pgconn",
        "round trips to PostgreSQL counted from the protocol itself, BEGIN and COMMIT included, and the statements "
        "the server received (tests/test_round_trips.py, tests/test_shard_readiness.py, scripts/bench_capacity.py)",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.connection (the sqlite3 connection under Django's wrapper), for its trace callback",
        ("tests/test_shard_readiness.py",),
        "set_trace_callback",
        "the statements SQLite ran, to check that an execute wrapper saw every one (the shard-readiness capture)",
    ),
    # --- Django: the SQLite write connection (notebook.sqlite, notebook.transactions) ----------
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.inc_thread_sharing",
        ("notebook/sqlite/files.py",),
        "inc_thread_sharing",
        "one write connection per database file, used by whichever thread holds the write queue",
    ),
    Internal(
        DJANGO,
        "connections[using] = ... (ConnectionHandler.__setitem__), BaseDatabaseWrapper.in_atomic_block",
        ("notebook/transactions.py",),
        "connections[using] = file.connection",
        "the thread's handle swapped for the write connection for one transaction, then put back",
    ),
    Internal(
        DJANGO,
        "django.db.migrations.recorder.MigrationRecorder",
        ("notebook/sqlite/triggers.py",),
        "MigrationRecorder",
        "the trigger check looks only at databases where migration 0007 is applied",
    ),
    # --- Django: responses ----------------------------------------------------------------------
    Internal(
        DJANGO,
        "HttpResponse._has_been_logged",
        ("codex_site/middleware.py", "authserver/enterprise/sso.py", "authserver/enterprise/scim/views.py"),
        "_has_been_logged",
        "a 503 logged in one line already is not logged again at ERROR by django.utils.log.log_response",
    ),
    # --- django-oauth-toolkit -------------------------------------------------------------------
    Internal(
        DOT,
        "oauth2_provider.cimd._validate_client_id_url, _resolve_and_validate, _effective_max_age(cache_control) "
        "(the answer's lifetime, clamped to CIMD_METADATA_MIN/MAX_AGE_SECONDS); SafeMetadataFetcher._read_document "
        "replaced (HardenedFetcher._read_document: DOT's rules for the answer, its body read by "
        "common.inputs.json_document)",
        ("authserver/clients/fetching.py",),
        "_effective_max_age",
        "every fetch of a document or key set keeps DOT's request-forgery rules and its rules for the answer, "
        "under a deadline over the whole exchange (DOT's fetcher bounds each read only) and the shared slots; "
        "DOT's json.loads of the body raises RecursionError on deep nesting and lets lone surrogates through",
    ),
    Internal(
        URLLIB3,
        "urllib3.connection.HTTPSConnection._new_conn (overridden: the one place a connection makes its TCP "
        "socket; it must return that socket connected, raising ConnectTimeoutError or NewConnectionError), "
        "host, port and timeout as it reads them; HTTPSConnectionPool.ConnectionCls set on the pool",
        ("authserver/clients/fetching.py",),
        "def _new_conn",
        "a fetch's TCP socket is watched from before it connects, so that a newcomer taking the fetch's slot "
        "can shut down a connection attempt the remote never answers (urllib3 gives no other hold on it)",
    ),
    Internal(
        DOT,
        "OAuth2Validator._load_application (overridden: called for every client lookup, before DOT's "
        "cimd.resolve_cimd_application and refresh_if_stale), OAuth2Validator._check_secret (overridden, and "
        "handed to authserver.clients.authentication as the one comparison of a secret with the stored one)",
        ("authserver/oauth/validators.py",),
        "def _load_application",
        "an unknown metadata-document client is answered as unknown and nothing is fetched outside the "
        "authorization endpoint; a public client's empty secret matches nothing; a secret is compared as DOT "
        "compares it (hashed or not)",
    ),
    Internal(
        DOT,
        "OAuthLibCore.authenticate_client (what ClientProtectedResourceMixin calls for introspection) builds "
        "an oauthlib Request and lets the validator's exceptions through",
        ("authserver/oauth/views.py",),
        "except errors.OAuth2Error as refused",
        "introspection answers the one client authentication's own refusal (400 for credentials in two places, "
        "429 past the failures' limits) instead of a bare 401",
    ),
    Internal(
        DOT,
        "AuthorizationView.get reads approval_prompt from request.GET (and the application's "
        "skip_authorization) to skip the consent page",
        ("authserver/oauth/views.py", "authserver/signals.py"),
        "skip_authorization",
        "consent is always asked: the parameter is dropped before DOT reads it, and no application skips it",
    ),
    Internal(
        DOT,
        "AuthorizationView.form_valid answers Allow and Deny alike from the posted form, and only Allow's "
        "redirect_uri is checked (by oauthlib's validate_authorization_request): Deny raises AccessDeniedError "
        "and redirects to the posted redirect_uri as it is",
        ("authserver/oauth/views.py",),
        "Deny's included",
        "every answer of the consent form goes only to a redirect URI the client registered",
    ),
    Internal(
        DOT,
        "ClientProtectedResourceMixin.dispatch: authenticate_client, then verify_request (a bearer token), "
        "then unauthenticated_response",
        ("authserver/oauth/views.py",),
        "def verify_request",
        "introspection by provisioned resource servers only, with their client secret, never by a token",
    ),
    Internal(
        DOT,
        "OAuth2Validator._create_access_token (overridden: called inside _save_bearer_token's transaction, "
        "after DOT sets request.user to None for client_credentials), GRANT_TYPE_MAPPING's client_credentials",
        ("authserver/oauth/validators.py",),
        "def _create_access_token",
        "a headless agent's client-credentials token acts for its owner's codex, and is refused when the agent "
        "was revoked meanwhile (its row read under the lock agent_revoke takes, after the owner's lock)",
    ),
    Internal(
        DOT,
        "TokenView.authorization_flow_token_response (overridden: after the grant's transaction it reads "
        "the access token it issued back by checksum with .get(), to send app_authorized)",
        ("authserver/oauth/token_view.py",),
        "def authorization_flow_token_response",
        "a revocation that commits between the issuance and that read (the person's, a code's second use) "
        "makes it DoesNotExist: answered invalid_grant, never a 500",
    ),
    Internal(
        DOT,
        "OAuth2Validator.save_bearer_token wrapped in a transaction of ours: its _save_bearer_token locks the "
        "refresh token by pk, marks it revoked and saves the new pair there, and reads the code's Grant by code "
        "for its resource; invalidate_authorization_code (replaced) is what deletes the Grant, after save_token",
        ("authserver/oauth/validators.py",),
        "def save_bearer_token",
        "each grant is exchanged at most once: the person's lock and the grant's row, read again under its lock "
        "(authserver.core.exchange), before DOT saves; the code is spent in the same transaction",
    ),
    Internal(
        DOT,
        "OAuth2Validator._check_and_set_request_resource (overridden; also called by the ID-JAG grant "
        "before it checks the assertion)",
        ("authserver/oauth/validators.py", "authserver/enterprise/id_jag.py"),
        "_check_and_set_request_resource",
        "a missing resource is pinned to this server's and any other refused (invalid_target)",
    ),
    Internal(
        DOT,
        "Application.get_allowed_schemes and Application.redirect_uri_allowed replaced on DOT's own "
        "Application class at start-up (AbstractApplication.redirect_uri_allowed, DOT's match, still called); "
        "AbstractApplication.clean checks each redirect URI's scheme against get_allowed_schemes, and "
        "OAuth2Validator.validate_redirect_uri asks redirect_uri_allowed",
        ("authserver/clients/redirect_uris.py",),
        "Application.redirect_uri_allowed = ",
        "one redirect-URI rule: DOT documents both as an application model's methods to override (this project "
        "keeps DOT's model, whose tables cannot be swapped), so DOT's clean accepts an application exactly when "
        "the rule accepts each of its redirect URIs, and nobody is sent to a URI the rule refuses",
    ),
    Internal(
        DOT,
        "oauth2_provider.http.OAuth2ResponseRedirect(url, allowed_schemes), built as "
        "BaseAuthorizationView.redirect builds it",
        ("authserver/oauth/views.py",),
        "OAuth2ResponseRedirect(",
        "the authorization view's redirect checks the scheme against the client's redirect URIs the rule "
        "accepts, also for an error DOT found before it loaded the client (it passes no application)",
    ),
    # --- oauthlib: client authentication (authserver.clients.authentication) --------------------
    Internal(
        OAUTHLIB,
        "RequestValidator.authenticate_client raising an OAuth2Error (rather than answering False) is answered "
        "as that error by every grant's create_token_response and by RevocationEndpoint (e.json, "
        "e.status_code, e.headers); an OAuth2Error subclass overriding status_code and the headers property; "
        "Request's body parameters read as attributes (client_secret, client_assertion, client_assertion_type: "
        "getattr with a default, since an absent one not in Request._params raises AttributeError)",
        ("authserver/clients/authentication.py", "authserver/oauth/validators.py"),
        "authenticate_client",
        "one client authentication for every endpoint, whose refusals say why (invalid_request for "
        "credentials in two places, 429 with Retry-After past the failures' limits)",
    ),
    # --- oauthlib: the jwt-bearer grant DOT does not have ---------------------------------------
    Internal(
        OAUTHLIB,
        "oauthlib.oauth2.Server subclassed, adding a handler to its TokenEndpoint.grant_types dict after "
        "__init__; GrantTypeBase subclassed (create_token_response/validate_token_request, and its helpers "
        "validate_client_authentication, validate_grant_type, _get_default_headers); Request.duplicate_params "
        "and a body parameter (assertion) read as a Request attribute",
        ("authserver/enterprise/id_jag.py",),
        "class IdJagGrant(GrantTypeBase)",
        "RFC 7523 jwt-bearer for ID-JAGs (Enterprise-Managed Authorization): oauthlib and DOT 3.4.1 have no "
        "such grant; DOT takes the server class from OAUTH2_SERVER_CLASS",
    ),
    Internal(
        DOT,
        "the AccessToken table's columns (token_checksum, expires, scope, resource, user, application) "
        "read by hand-built SQL",
        ("authserver/core/token_check.py", "authserver/oauth/validators.py"),
        "token_checksum",
        "the token check's one query, built from the models' metadata (the queryset is the fallback); "
        "the revocation endpoint's lookup of the token it revokes, for its audit line",
    ),
    # --- MCP SDK ---------------------------------------------------------------------------------
    Internal(
        MCP,
        "Server(get_tool_input_schema=...) and mcp.shared.inbound.x_mcp_header_map",
        ("mcp_endpoint/server.py",),
        "x_mcp_header_map",
        "the Mcp-Param-* header check skipped for schemas without annotations (the same answer, no walks)",
    ),
    Internal(
        MCP,
        "a tools/call handler returning the result's wire-form dict, not a CallToolResult: the members, their "
        "order and resultType as mcp_types.methods.serialize_server_result gives them in each protocol version",
        ("mcp_endpoint/results.py", "tests/test_mcp_results.py"),
        "serialize_server_result",
        "the result is served as built (ServedToolResults), the very dict the SDK's per-version validation gives",
    ),
    Internal(
        MCP,
        "mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS; "
        "mcp.shared.inbound.classify_inbound_request's answer to an unknown version",
        ("mcp_endpoint/versions.py",),
        "HANDSHAKE_PROTOCOL_VERSIONS",
        "the versions the endpoint documents are served, and others refused with the SDK's own error shape",
    ),
    Internal(
        MCP,
        "StreamableHTTPSessionManager(stateless=True) seeds ServerRequestContext.protocol_version with the "
        "request's MCP-Protocol-Version header, or with mcp_types.DEFAULT_NEGOTIATED_VERSION when there is none",
        ("mcp_endpoint/versions.py",),
        "DEFAULT_NEGOTIATED_VERSION",
        "a request without the header is served as 2025-03-26: its results and listing as that version knows them",
    ),
    Internal(
        MCP,
        "StreamableHTTPSessionManager.handle_request called once per message of a JSON-RPC batch, each with "
        "the batch's scope and a body of its own, its answer captured from send",
        ("mcp_endpoint/batches.py",),
        "through_the_transport",
        "a 2025-03-26 batch answered message by message by the SDK, which takes one message per POST",
    ),
    Internal(
        MCP,
        "ServerRequestContext.request.scope is the ASGI scope the request came with, on the transport's path and "
        "the kernel's (ServerMessageMetadata.request_context)",
        ("mcp_endpoint/http.py", "mcp_endpoint/server.py"),
        "TOKEN_SCOPE_KEY",
        "the guard hands the request's token down to the tool handlers in the scope",
    ),
    # --- MCP SDK: one message through its kernel (mcp_endpoint.exchange) --------------------------
    Internal(
        MCP,
        "mcp.server.runner.serve_one and modern_error_data; mcp.server.connection.Connection.from_envelope; "
        "a DispatchContext of our own (mcp.shared.dispatcher's protocol, NoBackChannelError); ServerMessageMetadata; "
        "TransportContext; what handle_modern_request and the stateless StreamableHTTPServerTransport do before "
        "and after the kernel (check_accept_headers, find_duplicated_routing_header, classify_inbound_request, "
        "ERROR_CODE_HTTP_STATUS, handler_exception_to_error_data, progress_token_from_params, their writes: "
        "json.dumps of the 2026-07-28 reply, model_dump_json(exclude_unset) of the handshake versions'); the "
        "default lifespan's state ({}); a stateless connection born ready",
        ("mcp_endpoint/exchange.py", "tests/test_mcp_exchange.py"),
        "serve_one",
        "the SDK's public transport takes a POST's bytes only: the message the guard parsed goes to the kernel "
        "every transport ends in, and its answer is written once; byte-identical answers proven against the "
        "transport in every version (tests/test_mcp_exchange.py)",
    ),
    Internal(
        MCP,
        "mcp.server.runner._extract_meta; ServerRequestContext built with no session (the field is typed "
        "ServerSession); Server.middleware composed outermost-first and called as ServerRunner._on_request "
        "composes and calls it (_compose_server_middleware, _apply_middleware), the kernel's _inner never reached "
        "for a tools/call",
        ("mcp_endpoint/exchange.py", "tests/test_mcp_exchange.py"),
        "tool_call",
        "a tools/call runs the server's middleware (the SDK's span, ServedToolResults) without the per-request "
        "session, connection and teardown, which no tool handler here uses; the same bytes in every version and "
        "error form (tests/test_mcp_exchange.py)",
    ),
    Internal(
        MCP,
        "Server.middleware (provisional) holding a middleware that answers tools/call without call_next: "
        "mcp_types.methods.validate_client_request and CallToolRequestParams.model_validate as the kernel runs "
        "them, Server.server_info_stamp as _stamp_server_info adds it, Server.cache_hints empty for tools/call",
        ("mcp_endpoint/exchange.py", "mcp_endpoint/server.py"),
        "ServedToolResults",
        "a tool result is served as the handler built it from the project's schemas, not validated and dumped "
        "again per version (the same bytes: tests/test_mcp_exchange.py)",
    ),
    # --- Django: request connections closed when the request ends (codex_site.request_connections)
    Internal(
        DJANGO,
        "ConnectionHandler.all(initialized_only=True); request_finished's sender being the handler "
        "class (django.core.handlers.asgi.ASGIHandler)",
        ("codex_site/request_connections.py",),
        "initialized_only",
        "close the connections a page or OAuth request opened, in its own thread, without opening new ones",
    ),
    # --- Traces (common.tracing) -------------------------------------------------------------------
    Internal(
        MCP,
        "mcp.server._otel.OpenTelemetryMiddleware, which Server puts in its (provisional) middleware list; "
        "mcp.shared._otel.extract_trace_context, the trace context it reads from a request's _meta",
        ("common/tracing.py", "mcp_endpoint/server.py", "tests/test_tracing.py"),
        "OpenTelemetryMiddleware",
        "the MCP span of each request (continuing the client's traceparent from _meta) is the SDK's own",
    ),
    Internal(
        DJANGO,
        "BaseDatabaseWrapper.execute_wrappers appended to for a connection's life (the list behind the "
        "documented execute_wrapper() context manager)",
        ("common/tracing.py",),
        "execute_wrappers.append",
        "a span per SQL statement on every connection of the process, the SQLite write connection included",
    ),
    # --- Django: the default cache as security state (common.durable_cache) -------------------
    Internal(
        DJANGO,
        "DatabaseCache's table (its cache_key, value and expires columns, as createcachetable makes them), its "
        "encoding of a value (base64 of a pickle, pickle_protocol) and of expiry (whole seconds) that its reads "
        "decode, and incr reads and writes as they do, cache_model_class, _table, BaseCache._max_entries; set, "
        "add, touch and incr overridden, so that _base_set and _cull are never called",
        ("common/durable_cache.py",),
        "pickle_protocol",
        "a cache that never evicts a live entry (a sweep deletes expired rows only), fails closed on writes, "
        "writes with one statement instead of a count of the whole table first, and increments atomically",
    ),
    # --- django-allauth: accounts, single sign-on, second factor ------------------------------
    Internal(
        ALLAUTH,
        "allauth.core.internal.ratelimit, allauth.mfa.totp.internal.auth and allauth.socialaccount.internal."
        "jwtkit keep their counters, used-code marks and seen ID-token jtis in django.core.cache.cache "
        "(the default alias; no setting names another)",
        ("codex_site/settings.py",),
        "allauth uses this alias only",
        "the default cache is the one that never evicts a live entry and fails closed; strangers' notes go elsewhere",
    ),
    Internal(
        ALLAUTH,
        "allauth.core.internal.ratelimit.get_rates, get_cache_key, time; DefaultAccountAdapter."
        "_get_login_attempts_cache_key; the counters' shape (a list of attempt times, newest first)",
        ("authserver/people/signin.py", "authserver/people/leaving.py"),
        "allauth_ratelimit.get_cache_key",
        "how long a throttled sign-in must wait (allauth's refusal says only 'try again later'), and "
        "which counters name an account that leaves",
    ),
    Internal(
        ALLAUTH,
        "the time module that allauth.core.internal.ratelimit and allauth.mfa.totp.internal.auth read",
        ("tests/clocks.py", "tests/test_browser_mfa.py"),
        "totp",
        "tests stand in a clock for the throttle's windows and the TOTP steps, rather than wait",
    ),
    Internal(
        ALLAUTH,
        "allauth.core.context.request_context (the request allauth.core.context.request answers, as "
        "allauth's AccountMiddleware sets it)",
        ("tests/test_hostile_consent.py",),
        "allauth_context.request_context",
        "the property test asks the account adapter's is_safe_url about many URLs without a request "
        "through the middleware for each",
    ),
    Internal(
        ALLAUTH,
        "allauth.socialaccount.providers.openid_connect.views.login, callback (wrapped, by the same URL names)",
        ("authserver/enterprise/sso.py",),
        "oidc_views.callback",
        "a provider that is down or answers wrongly gets a page: allauth's views raise on discovery faults",
    ),
    Internal(
        ALLAUTH,
        "the context allauth's account, mfa and socialaccount views give their templates (overridden "
        "in the site's words): form fields by name, form.secret, totp_url, totp_svg_data_uri, "
        "redirect_field, reauthentication_alternatives (by id), unused_codes, can_*_codes, "
        "js_data.request_options.publicKey.allowCredentials (fido2's request options), and the ids "
        "allauth's WebAuthn script is given (data-allauth-onload)",
        ("templates/mfa/authenticate.html", "templates/mfa/totp/activate_form.html"),
        '{% extends "base.html" %}',
        "the sign-in library's pages in the site's voice; the passkey step is offered only to an "
        "account that has a passkey (allauth offers it to every account)",
    ),
    Internal(
        ALLAUTH,
        "DefaultSocialAccountAdapter.get_requests_session (overridden; not in allauth's documentation): the "
        "requests.Session every request of its OpenID Connect provider goes through (discovery, token, user info, "
        "key set), each answer read with Response.json()",
        ("authserver/enterprise/sso.py",),
        "def get_requests_session",
        "a provider's answers are read as any stranger's JSON (common.inputs.json_document), through a response "
        "hook on that session (allauth reads them with json.loads, which raises RecursionError on deep nesting and "
        "lets lone surrogates through)",
    ),
)
