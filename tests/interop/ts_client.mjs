// The memory server driven by the official TypeScript MCP SDK's Client, as a Node user would.
//
//   node ts_client.mjs --modules DIR --transport stdio|http --ledger FILE -- COMMAND...
//
// DIR is a node_modules folder holding @modelcontextprotocol/sdk; COMMAND starts the memory
// CLI (e.g. `agent-custody-memory`). Over stdio the SDK's StdioClientTransport spawns
// `COMMAND serve --ledger FILE`; over HTTP this script starts `COMMAND serve --http --port 0
// --ledger FILE --token-env MEMORY_TOKEN` with a fresh token and connects with
// `Authorization: Bearer <token>` (and once without it, which must be refused). Both connections
// are the gateway's: each tool call carries the receipt and agent `_meta` keys.
//
// It prints one JSON object on stdout: what the SDK answered at each step, nearly raw, for the
// Python tests (test_ts_sdk.py) to judge. The only verdicts computed here are the ones that need
// the SDK's own objects: whether the client cached an output validator for a tool, and what
// that validator says of a result and of a deliberately wrong one.

import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const { values: opts, positionals: command } = parseArgs({
  options: {
    modules: { type: "string" },
    transport: { type: "string" },
    ledger: { type: "string" },
  },
  allowPositionals: true,
});

const sdkRoot = join(opts.modules, "@modelcontextprotocol", "sdk", "dist", "esm");
const sdk = (path) => import(pathToFileURL(join(sdkRoot, path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ResourceUpdatedNotificationSchema } = await sdk("types.js");

const GATEWAY_META = (receipt) => ({
  "agent-custody/receipt": receipt,
  "agent-custody/agent": "ts-agent",
});

/** Record every message the client receives (to read the negotiated protocol version). */
function recorded(transport, seen) {
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const handler = transport.onmessage;
    transport.onmessage = (message, extra) => {
      seen.push(message);
      handler?.(message, extra);
    };
    return start();
  };
  return transport;
}

/** Start `serve --http` on a free loopback port; resolve with its URL once it says so. */
function startHttpServer(token) {
  const [program, ...args] = command;
  const child = spawn(
    program,
    [...args, "serve", "--http", "--port", "0", "--ledger", opts.ledger,
      "--token-env", "MEMORY_TOKEN"],
    { env: { ...process.env, MEMORY_TOKEN: token }, stdio: ["ignore", "ignore", "pipe"] },
  );
  const lines = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL in 60 s:\n${lines.join("\n")}`)), 60_000);
    child.on("exit", (code) => reject(new Error(`server exited ${code}:\n${lines.join("\n")}`)));
    createInterface({ input: child.stderr }).on("line", (line) => {
      lines.push(line);
      const match = /serving (http:\/\/\S+\/mcp);/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: new URL(match[1]) });
      }
    });
  });
}

function transportFor(url, token) {
  const headers = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  return new StreamableHTTPClientTransport(url, { requestInit: { headers } });
}

/** Resolve when `predicate(list)` holds, or after `ms` (the caller checks what arrived). */
async function until(predicate, list, ms) {
  const deadline = Date.now() + ms;
  while (!predicate(list) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function exercise(client, seen) {
  const out = {};
  const init = seen.find((m) => m.result?.protocolVersion);
  out.initialize = {
    protocolVersion: init?.result.protocolVersion,
    capabilities: client.getServerCapabilities(),
    serverInfo: client.getServerVersion(),
  };
  await client.setLoggingLevel("warning");
  out.loggingLevelSet = true;

  const { tools } = await client.listTools();
  out.tools = tools.map((tool) => ({
    ...tool,
    validatorCached: client.getToolOutputValidator(tool.name) !== undefined,
  }));

  const subject = `acct:${randomUUID().slice(0, 8)}`;
  const written = await client.callTool({
    name: "memory.write",
    arguments: { subject, predicate: "plan", value: { tier: "pro", seats: 5 }, space: "org" },
    _meta: GATEWAY_META("rcpt-ts-write"),
  });
  const validate = client.getToolOutputValidator("memory.write");
  out.write = written;
  out.writeValidation = {
    result: validate(written.structuredContent),
    wrong: validate({ fact: "not an object", eventId: 7 }),
  };
  const factId = written.structuredContent.fact.factId;

  out.read = await client.callTool({
    name: "memory.read",
    arguments: { subject },
    _meta: GATEWAY_META("rcpt-ts-read"),
  });

  // Resources and completions are the gateway's too: a request without its receipt is refused.
  out.resources = await client.listResources({ _meta: GATEWAY_META("rcpt-ts-resources") });
  out.templates = await client.listResourceTemplates();
  const factUri = `memory://fact/${encodeURIComponent(factId)}`;
  const subjectUri = `memory://subject/${encodeURIComponent(subject)}`;
  out.factResource = await client.readResource({
    uri: factUri,
    _meta: GATEWAY_META("rcpt-ts-fact"),
  });
  out.subjectResource = await client.readResource({
    uri: subjectUri,
    _meta: GATEWAY_META("rcpt-ts-subject"),
  });

  out.completions = {
    factId: await client.complete({
      ref: { type: "ref/resource", uri: "memory://fact/{factId}" },
      argument: { name: "factId", value: factId.slice(0, 6) },
      _meta: GATEWAY_META("rcpt-ts-complete"),
    }),
    subject: await client.complete({
      ref: { type: "ref/prompt", name: "memory.read" },
      argument: { name: "subject", value: subject.slice(0, 7) },
      _meta: GATEWAY_META("rcpt-ts-complete"),
    }),
  };

  const updated = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updated.push(n.params.uri);
  });
  await client.subscribeResource({ uri: factUri, _meta: GATEWAY_META("rcpt-ts-subscribe") });
  out.retract = await client.callTool({
    name: "memory.retract",
    arguments: { factId, reason: "interop test" },
    _meta: GATEWAY_META("rcpt-ts-retract"),
  });
  await until((list) => list.includes(factUri), updated, 10_000);
  out.subscription = { uri: factUri, subjectUri, updated: [...updated] };
  out.factAfterRetract = await client.readResource({
    uri: factUri,
    _meta: GATEWAY_META("rcpt-ts-fact-after"),
  });
  return out;
}

async function run() {
  const seen = [];
  const client = new Client({ name: "interop-ts-sdk", version: "1.0.0" });
  const report = { transport: opts.transport };
  if (opts.transport === "stdio") {
    const [program, ...args] = command;
    const transport = new StdioClientTransport({
      command: program,
      args: [...args, "serve", "--ledger", opts.ledger],
      stderr: "ignore",
    });
    await client.connect(recorded(transport, seen));
    Object.assign(report, await exercise(client, seen));
    await client.close();
    return report;
  }
  const token = randomBytes(24).toString("base64url");
  const { child, url } = await startHttpServer(token);
  try {
    try {
      const stranger = new Client({ name: "interop-no-token", version: "1.0.0" });
      await stranger.connect(transportFor(url));
      report.withoutToken = { refused: false };
      await stranger.close();
    } catch (error) {
      report.withoutToken = { refused: true, error: String(error?.message ?? error) };
    }
    await client.connect(recorded(transportFor(url, token), seen));
    Object.assign(report, await exercise(client, seen));
    await client.close();
    return report;
  } finally {
    child.kill("SIGTERM");
  }
}

process.stdout.write(`${JSON.stringify(await run())}\n`);
process.exit(0);
