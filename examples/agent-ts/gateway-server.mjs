// gateway-server.mjs: mcpgate as an MCP server of the OpenAI Agents SDK, on
// the official MCP TypeScript SDK (@modelcontextprotocol/sdk).
//
// The Agents SDK's own MCPServerStreamableHttp connects without declaring
// elicitation, so the gateway could never ask the user anything: every call
// that needs a question would end elicitation_unavailable. This class is the
// SDK's MCPServer interface implemented on the official client, which
// declares form elicitation and hands each form to the host's onElicit (the
// user at the keyboard). Everything else is the framework's: it lists the
// tools, calls toolMetaResolver before every call, and passes what that
// returns here as the call's _meta.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export class GatewayServer {
  // url: the gateway's /mcp endpoint. token: the user's bearer token (the
  // principal). onElicit(params): the host's answer to a form,
  // {action: "accept" | "decline" | "cancel", content}. toolMetaResolver:
  // the _meta of each call (see verdict-meta.mjs). onResult(name, result):
  // sees every raw tools/call result, _meta included.
  constructor({ url, token, onElicit, toolMetaResolver, onResult, name = "mcpgate" }) {
    this.name = name;
    this.url = url;
    this.token = token;
    this.onElicit = onElicit;
    this.toolMetaResolver = toolMetaResolver;
    this.onResult = onResult;
    this.cacheToolsList = false;
    this.client = null;
  }

  async connect() {
    const transport = new StreamableHTTPClientTransport(new URL(this.url), {
      requestInit: { headers: { Authorization: `Bearer ${this.token}` } },
    });
    const client = new Client(
      { name: "verdict-agent-ts", version: "1.0.0" },
      { capabilities: { elicitation: { form: {} } } },
    );
    client.setRequestHandler(ElicitRequestSchema, async (request) => this.onElicit(request.params));
    await client.connect(transport);
    this.client = client;
  }

  async close() {
    await this.client?.close();
    this.client = null;
  }

  async listTools() {
    // Pages are followed up to a bound, so that a listing that never ends
    // is an error rather than a hang.
    const tools = [];
    let cursor;
    for (let pages = 0; pages < 64; pages++) {
      const page = await this.client.listTools(cursor ? { cursor } : undefined);
      tools.push(...page.tools);
      cursor = page.nextCursor;
      if (!cursor) return tools;
    }
    throw new Error("the gateway's tool listing did not end within 64 pages");
  }

  async callToolResult(toolName, args, meta, options) {
    const params = { name: toolName, arguments: args ?? {} };
    if (meta) params._meta = meta;
    // A gated call waits as long as the user takes to answer its forms; the
    // SDK's default request timeout (60 s) is not the gateway's to meet.
    const result = await this.client.callTool(params, undefined, {
      timeout: 10 * 60 * 1000,
      signal: options?.signal,
    });
    this.onResult?.(toolName, result);
    return result;
  }

  async callTool(toolName, args, meta, options) {
    const result = await this.callToolResult(toolName, args, meta, options);
    const content = [...(result.content ?? [])];
    for (const key of ["_meta", "structuredContent", "isError"]) {
      if (result[key] !== undefined) {
        Object.defineProperty(content, key, { value: result[key], enumerable: false, configurable: true });
      }
    }
    return content;
  }

  async invalidateToolsCache() {}
}
