// A client on a pinned release of the TypeScript MCP SDK, run by tests/test_real_clients.py
// from the directory the SDK was installed into (so that node finds it): it connects over
// Streamable HTTP, lists the tools, calls all four and prints what it saw as one JSON line.
//
//   node ts_sdk_client.mjs URL token TOKEN          a bearer token
//   node ts_sdk_client.mjs URL dcr REDIRECT_URI     OAuth: discovery, dynamic registration, consent
//   node ts_sdk_client.mjs URL cimd DOCUMENT_URL    OAuth with a Client ID Metadata Document
//
// In the OAuth modes the person's part is played by the test: this prints
// "AUTHORIZE <url>" and reads, from its standard input, the query string the authorization
// server sent back to the redirect URI (code, state, iss).
//
// MCP_CLIENT_PACKAGE picks the package: "sdk" (@modelcontextprotocol/sdk 1.x, the default) or
// "client" (@modelcontextprotocol/client 2.x).

import { createInterface } from "node:readline";

const [url, mode, argument] = process.argv.slice(2);
const packageName = process.env.MCP_CLIENT_PACKAGE ?? "sdk";

let Client, StreamableHTTPClientTransport, UnauthorizedError;
if (packageName === "client") {
  ({ Client, StreamableHTTPClientTransport, UnauthorizedError } = await import("@modelcontextprotocol/client"));
} else {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
  ({ UnauthorizedError } = await import("@modelcontextprotocol/sdk/client/auth.js"));
}

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

class TestProvider {
  constructor(redirectUrl, metadataUrl) {
    this._redirectUrl = redirectUrl;
    if (metadataUrl) this.clientMetadataUrl = metadataUrl;
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    return {
      client_name: `TypeScript SDK (${packageName})`,
      redirect_uris: [this._redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(information) { this._client = information; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  redirectToAuthorization(authorizationUrl) { console.log(`AUTHORIZE ${authorizationUrl.href}`); }
  saveCodeVerifier(verifier) { this._verifier = verifier; }
  codeVerifier() { return this._verifier; }
  // 2.x: the authorization server found at redirect time, to check the answer's iss against.
  saveDiscoveryState(state) { this._discovery = state; }
  discoveryState() { return this._discovery; }
}

function payload(result) {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return JSON.parse(result.content[0].text);
}

async function connected(provider) {
  const options = provider
    ? { authProvider: provider }
    : { requestInit: { headers: { Authorization: `Bearer ${argument}` } } };
  const client = new Client({ name: `ts-${packageName}`, version: "1.0.0" });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), options));
    return client;
  } catch (error) {
    if (!provider || !(error instanceof UnauthorizedError)) throw error;
  }
  // The person signed in and approved: finish with what came back, then connect again. 2.x
  // takes the whole answer (and checks its iss, RFC 9207); 1.x takes the code alone.
  const transport = new StreamableHTTPClientTransport(new URL(url), options);
  const { value: answer } = await lines.next();
  const returned = new URLSearchParams(answer.trim());
  await transport.finishAuth(packageName === "client" ? returned : returned.get("code"));
  await client.connect(transport);
  return client;
}

const provider =
  mode === "dcr" ? new TestProvider(argument) :
  mode === "cimd" ? new TestProvider("http://127.0.0.1:9/callback", argument) : null;
const client = await connected(provider);
const listed = await client.listTools();
const requestId = `ts-${packageName}-${mode}-${Date.now()}`;
const saved = payload(await client.callTool({
  name: "field_notes_save",
  arguments: { requestId, entry: { content: `Saved by the TypeScript SDK (${packageName})`, tags: ["ts"] } },
})).entry;
const got = payload(await client.callTool({ name: "field_notes_get", arguments: { id: saved.id } })).entry;
const found = payload(await client.callTool({ name: "field_notes_search", arguments: { query: "TypeScript SDK" } }));
const updated = payload(await client.callTool({
  name: "field_notes_update",
  arguments: { id: saved.id, expectedRevision: 1, entry: { content: "Updated by the TypeScript SDK" } },
})).entry;
console.log(JSON.stringify({
  protocolVersion: client.transport?.protocolVersion ?? null,
  server: client.getServerVersion()?.name,
  tools: listed.tools.map((tool) => tool.name),
  outputSchemas: listed.tools.filter((tool) => tool.outputSchema).map((tool) => tool.name),
  saved: saved.id,
  got: got.content,
  found: found.entries.map((entry) => entry.id),
  updated: [updated.revision, updated.content],
  clientId: provider?.clientInformation()?.client_id ?? null,
}));
await client.close();
process.exit(0);
