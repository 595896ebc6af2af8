// An MCP host built on the official TypeScript SDK (1.x), as most hosts in
// use are. mcpgate's tests run it as a process against the real gateway.
//
// Usage: node host.mjs '<scenario JSON>'
//
// The scenario says how to reach the gateway and what to call:
//
//   {"transport": "http", "url": "http://.../mcp", "token": "...", "offer": "2025-06-18"}
//   {"transport": "stdio", "command": "/path/mcpgate", "args": [...], "stderr": "/path/log"}
//   "read":   {"name": "bank.get_balance", "arguments": {...}}
//   "gated":  {"name": "bank.transfer", "arguments": {...}}
//   "answers": {"to_account": "...", "amount": 1000}
//
// "offer" is the protocol revision the host offers in initialize (default:
// the SDK's latest, 2025-11-25), as a host on an older SDK would.
//
// It prints one JSON line per step on stdout, which the test reads in
// order: connected, tools, read, gated (the user answers every form: the
// values from "answers", every approval ticked; "messages" are the forms'
// messages), declined (the user declines the first form), unticked (the
// user answers as before, keeps any value offered from last time, and
// leaves every approval box unticked), done. Raw results are printed as they came
// off the wire. On any failure it prints {"step":"error",...} and exits 1.
import { openSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const scenario = JSON.parse(process.argv[2]);

function emit(step, fields) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + "\n");
}

// Wire wraps a transport to offer another protocol revision in initialize
// and to keep the raw result of every tools/call, which the SDK's parsed
// results would not show as sent.
class Wire {
  constructor(inner, offer) {
    this.inner = inner;
    this.offer = offer;
    this.methods = new Map(); // request id -> method
    this.raw = new Map(); // request id -> raw result
    inner.onmessage = (msg, extra) => {
      if (msg.id !== undefined && this.methods.get(msg.id) === "tools/call") {
        this.raw.set(msg.id, msg.result ?? msg.error);
      }
      this.onmessage?.(msg, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (err) => this.onerror?.(err);
  }
  start() {
    return this.inner.start();
  }
  send(msg, options) {
    if (msg.method !== undefined && msg.id !== undefined) {
      this.methods.set(msg.id, msg.method);
    }
    if (this.offer && msg.method === "initialize") {
      msg = { ...msg, params: { ...msg.params, protocolVersion: this.offer } };
    }
    return this.inner.send(msg, options);
  }
  close() {
    return this.inner.close();
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  setProtocolVersion(v) {
    this.negotiated = v;
    this.inner.setProtocolVersion?.(v);
  }
  lastCall() {
    let last;
    for (const [id, method] of this.methods) {
      if (method === "tools/call") last = id;
    }
    return this.raw.get(last);
  }
}

function transport() {
  if (scenario.transport === "stdio") {
    return new StdioClientTransport({
      command: scenario.command,
      args: scenario.args ?? [],
      env: scenario.env,
      stderr: scenario.stderr ? openSync(scenario.stderr, "a") : "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(scenario.url), {
    requestInit: { headers: { Authorization: `Bearer ${scenario.token}` } },
  });
}

// The user at the keyboard: types the values asked for and ticks every
// approval ("tick"), leaves the approvals unticked ("untick"), or declines
// ("decline"). The SDK checks an accepted form's content against the
// form's schema before it is sent, as a host's form does.
let mode = "tick";
const forms = [];
function answer(request) {
  const params = request.params;
  forms.push(params);
  if (mode === "decline") return { action: "decline" };
  const content = {};
  for (const [key, prop] of Object.entries(params.requestedSchema?.properties ?? {})) {
    if (prop.type === "boolean") content[key] = mode === "tick";
    else if (key in (scenario.answers ?? {})) content[key] = scenario.answers[key];
    else if (prop.enum?.includes("keep")) content[key] = "keep";
  }
  return { action: "accept", content };
}

async function main() {
  const wire = new Wire(transport(), scenario.offer);
  const elicitation = scenario.offer === "2025-06-18" ? {} : { form: {} };
  const client = new Client({ name: "tshost", version: "1.0.0" }, { capabilities: { elicitation } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => answer(request));
  await client.connect(wire);
  emit("connected", {
    protocolVersion: wire.negotiated ?? null,
    sessionId: wire.sessionId ?? null,
    server: client.getServerVersion(),
  });

  const { tools } = await client.listTools();
  emit("tools", { names: tools.map((t) => t.name) });

  // A host waits as long as the user takes; the SDK's default request
  // timeout (60s) is not the gateway's to meet.
  const opts = { timeout: 10 * 60 * 1000 };
  await client.callTool(scenario.read, undefined, opts);
  emit("read", { result: wire.lastCall() });

  forms.length = 0;
  await client.callTool(scenario.gated, undefined, opts);
  emit("gated", { result: wire.lastCall(), forms: forms.length, messages: forms.map((f) => f.message) });

  forms.length = 0;
  mode = "decline";
  await client.callTool(scenario.gated, undefined, opts);
  emit("declined", { result: wire.lastCall(), forms: forms.length });

  forms.length = 0;
  mode = "untick";
  await client.callTool(scenario.gated, undefined, opts);
  emit("unticked", { result: wire.lastCall(), forms: forms.length });

  await client.close();
  emit("done", {});
}

main().catch((err) => {
  emit("error", { message: String(err?.stack ?? err) });
  process.exit(1);
});
