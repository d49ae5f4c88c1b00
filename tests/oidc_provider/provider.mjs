// A real OpenID Connect provider (panva's oidc-provider, OpenID-certified) on loopback for
// the single sign-on tests. Started by tests/oidc.py:
//   node provider.mjs <port> <clients.json>
// Its own development sign-in pages take any login: "ada@acme.test" signs in as that person,
// with that email, verified, and the name "Ada"; a login that starts with "unverified-" has
// its email unverified. Printed "listening" once it serves.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [port, clientsFile, modules] = process.argv.slice(2);
const require = createRequire(pathToFileURL(modules + "/"));
const { default: Provider } = await import(pathToFileURL(require.resolve("oidc-provider")));

// The issuer as tests/oidc.py names it (it may end in "/", as Auth0's do).
const issuer = process.env.ISSUER ?? `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: JSON.parse(readFileSync(clientsFile, "utf8")),
  claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "preferred_username"] },
  scopes: ["openid", "email", "profile"],
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["test-only-cookie-key-for-loopback"] },
  async findAccount(ctx, id) {
    const email = id.replace(/^unverified-/, "");
    return {
      accountId: id,
      async claims() {
        const local = email.split("@")[0];
        return {
          sub: id,
          email,
          email_verified: !id.startsWith("unverified-"),
          name: local.charAt(0).toUpperCase() + local.slice(1),
          preferred_username: local,
        };
      },
    };
  },
});
provider.proxy = false;
const server = provider.listen(Number(port), "127.0.0.1", () => console.log("listening " + issuer));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
