// An enterprise IdP for the Enterprise-Managed Authorization tests (tests/test_id_jag_idp.py):
// panva's oidc-provider (the one the single sign-on tests run, tests/oidc.py), served over https
// on loopback, with an RFC 8693 token-exchange grant that trades the person's ID token for an
// Identity Assertion JWT Authorization Grant, as draft-ietf-oauth-identity-assertion-authz-grant
// §4.3 and the MCP extension's §4 say:
//   node id_jag_provider.mjs <port> <clients.json> <node_modules> <cert.pem> <key.pem> <policy.json>
// policy.json: {"client_ids": {"<client id here>": "<its client id at the MCP server>"},
//               "scopes": "<the scopes the organization grants>", "lifetime": <seconds>}
// Its development sign-in pages take any login ("ada@acme.test" is that person, with that
// email). Printed "listening" once it serves.
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [port, clientsFile, modules, certFile, keyFile, policyFile] = process.argv.slice(2);
const require = createRequire(pathToFileURL(modules + "/"));
const { default: Provider, errors } = await import(pathToFileURL(require.resolve("oidc-provider")));

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token";
const policy = JSON.parse(readFileSync(policyFile, "utf8"));

// One RSA key signs the ID tokens and the ID-JAGs; its public half is at the jwks_uri.
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: "jwk" }), kid: "acme-1", alg: "RS256", use: "sig" };
const signingKey = createPrivateKey({ key: jwk, format: "jwk" });
createPublicKey(signingKey); // fails early on a bad key

// The issuer as tests/oidc.py names it (it may end in "/", as Auth0's do).
const issuer = process.env.ISSUER ?? `https://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: JSON.parse(readFileSync(clientsFile, "utf8")),
  jwks: { keys: [jwk] },
  claims: { openid: ["sub"], email: ["email", "email_verified"] },
  scopes: ["openid", "email"],
  pkce: { required: () => true },
  conformIdTokenClaims: false, // the ID token carries the email the ID-JAG passes on
  features: { devInteractions: { enabled: true }, resourceIndicators: { enabled: false } },
  cookies: { keys: ["test-only-cookie-key-for-loopback"] },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, email: id, email_verified: true }; } };
  },
});
provider.proxy = false;

const b64url = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");

// RFC 8693 at the IdP: the client authenticates (oidc-provider did that before this runs), its
// subject_token is an ID token this IdP issued to that very client (MCP extension §4.1), and the
// organization's policy decides the scopes. The answer is the ID-JAG (§4.2).
provider.registerGrantType(
  TOKEN_EXCHANGE,
  async (ctx) => {
    const { params, client } = ctx.oidc;
    if (params.requested_token_type !== ID_JAG) throw new errors.InvalidRequest("requested_token_type must be id-jag");
    if (params.subject_token_type !== ID_TOKEN) throw new errors.InvalidRequest("subject_token_type must be id_token");
    if (!params.audience || !params.resource) throw new errors.InvalidRequest("audience and resource are required");
    let idToken;
    try {
      idToken = await provider.IdToken.validate(params.subject_token, client);
    } catch (error) {
      throw new errors.InvalidGrant(`subject_token is not an ID token issued to this client (${error.message})`);
    }
    const now = Math.floor(Date.now() / 1000);
    if (idToken.payload.exp < now) throw new errors.InvalidGrant("subject_token has expired");
    const target = policy.client_ids[client.clientId];
    if (!target) throw new errors.InvalidGrant("the organization has not allowed this client at that server");
    const granted = policy.scopes.split(" ");
    const asked = params.scope ? params.scope.split(" ") : granted;
    const scope = asked.filter((name) => granted.includes(name)).join(" ");
    if (!scope) throw new errors.InvalidScope("the organization grants none of these scopes");
    const lifetime = policy.lifetime ?? 300;
    const claims = {
      iss: issuer,
      sub: idToken.payload.sub,
      aud: params.audience,
      resource: params.resource,
      client_id: target,
      jti: randomUUID(),
      iat: now,
      exp: now + lifetime,
      scope,
      email: idToken.payload.email,
      email_verified: idToken.payload.email_verified,
    };
    const input = `${b64url({ typ: "oauth-id-jag+jwt", alg: "RS256", kid: jwk.kid })}.${b64url(claims)}`;
    const signature = sign("sha256", Buffer.from(input), signingKey).toString("base64url");
    ctx.body = {
      issued_token_type: ID_JAG,
      access_token: `${input}.${signature}`,
      token_type: "N_A",
      scope,
      expires_in: lifetime,
    };
  },
  ["subject_token", "subject_token_type", "requested_token_type", "audience", "resource", "scope"],
);

const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, provider.callback());
server.listen(Number(port), "127.0.0.1", () => console.log("listening " + issuer));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
