// A small MCP host on the official TypeScript SDK (1.x): it connects to the
// server of a host config over streamable HTTP, makes one tools/call, and
// answers the server's forms as the user at the keyboard. docs/operations.md
// ("A local stack") runs it against mcpgate.
//
// Usage: node call.mjs CONFIG CALL [field=value ...]
//
//   CONFIG       a host config as desktop hosts take it:
//                {"mcpServers": {"<name>": {"type": "http", "url": "...", "headers": {...}}}}
//                with exactly one server.
//   CALL         the tools/call params, sent as they are: {"name", "arguments", "_meta"}.
//   field=value  the user's answer to the form field of that name: text, a number, one of the
//                field's choices, or yes/no for a checkbox.
//
// A field without an answer on the command line is asked at the terminal; with no terminal to
// ask, the form is declined. Each form is printed as the user would see it, with the answers
// given, then the call's result: its text and the gateway's io.verdict/* entries of _meta.
// It exits 0 when the call ran (the result is not a tool error), 1 otherwise.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [configFile, callFile, ...given] = process.argv.slice(2);
if (!configFile || !callFile) {
  console.error("usage: node call.mjs CONFIG CALL [field=value ...]");
  process.exit(2);
}
const servers = Object.entries(JSON.parse(readFileSync(configFile, "utf8")).mcpServers ?? {});
if (servers.length !== 1) {
  console.error(`${configFile}: want exactly one server in mcpServers, have ${servers.length}`);
  process.exit(2);
}
const [serverName, server] = servers[0];
const call = JSON.parse(readFileSync(callFile, "utf8"));
const answers = new Map();
for (const a of given) {
  const eq = a.indexOf("=");
  if (eq < 1) {
    console.error(`answer ${JSON.stringify(a)}: want field=value`);
    process.exit(2);
  }
  answers.set(a.slice(0, eq), a.slice(eq + 1));
}

// The terminal, opened only when a form asks what the command line does not answer.
let tty;
async function ask(prompt) {
  if (!process.stdin.isTTY) return undefined;
  tty ??= createInterface({ input: process.stdin, output: process.stdout });
  return (await tty.question(prompt)).trim();
}

// value turns the text the user gave into the field's type; undefined when it does not fit.
function value(prop, text) {
  const choices = prop.enum ?? prop.oneOf?.map((o) => o.const);
  switch (prop.type) {
    case "boolean":
      return { yes: true, y: true, true: true, no: false, n: false, false: false }[text.toLowerCase()];
    case "number":
    case "integer": {
      const n = Number(text);
      return text !== "" && Number.isFinite(n) && (prop.type === "number" || Number.isInteger(n)) ? n : undefined;
    }
    default:
      return choices && !choices.includes(text) ? undefined : text;
  }
}

let forms = 0;
async function answer(request) {
  const { message, requestedSchema } = request.params;
  forms++;
  console.log(`\n--- form ${forms} from ${serverName}\n${message}`);
  const content = {};
  const required = new Set(requestedSchema?.required ?? []);
  for (const [key, prop] of Object.entries(requestedSchema?.properties ?? {})) {
    const choices = prop.enum ?? prop.oneOf?.map((o) => o.const);
    console.log(`  [${key}] ${prop.title ?? key}`);
    if (prop.description) console.log(`      ${prop.description}`);
    if (choices) console.log(`      choices: ${choices.join(", ")}`);
    let text = answers.get(key);
    if (text === undefined) text = await ask(`  ${key}${prop.type === "boolean" ? " (yes/no)" : ""}> `);
    if (text === undefined || text === "") {
      if (!required.has(key)) continue;
      console.log(`  no answer for ${key}: the user declines the form`);
      return { action: "decline" };
    }
    const v = value(prop, text);
    if (v === undefined) {
      console.log(`  ${JSON.stringify(text)} is not a ${choices ? "listed choice" : prop.type} for ${key}: the user declines the form`);
      return { action: "decline" };
    }
    content[key] = v;
    console.log(`      answer: ${JSON.stringify(v)}`);
  }
  return { action: "accept", content };
}

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: server.headers ?? {} },
  });
  // Form elicitation declared: without it the gateway cannot ask, and a gated call that needs
  // an answer ends elicitation_unavailable.
  const client = new Client({ name: "verdict-call", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, answer);
  await client.connect(transport);
  console.log(`calling ${call.name} on ${serverName} (${server.url})`);
  // A host waits as long as the user takes; the SDK's default request timeout (60s) would end
  // the call while a form is open.
  const result = await client.callTool(call, undefined, { timeout: 10 * 60 * 1000 });
  console.log(`\n--- result${result.isError ? " (tool error)" : ""}`);
  for (const c of result.content ?? []) {
    if (c.type === "text") console.log(c.text);
  }
  for (const [k, v] of Object.entries(result._meta ?? {})) {
    if (k.startsWith("io.verdict/")) console.log(`${k}: ${JSON.stringify(v)}`);
  }
  tty?.close();
  await client.close();
  return result.isError ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(String(err?.stack ?? err));
    process.exit(1);
  },
);
