// verdict-meta.mjs: the host's side of mcpgate's io.verdict/* _meta keys.
// This is the part an integrator copies into an agent host.
//
// The gate grounds a value only in text the user typed. Only the host knows
// who typed what: it holds the conversation, and it writes the trust labels.
// The model never writes them, and nothing the model produces (its tool
// arguments, its messages) can change them: this module reads the model's
// arguments only to find where their text stands in what was already said.
//
// For every gated tool call it sends:
//
//   io.verdict/instruction      the user's turns as "user" segments, and other
//                               text the agent read (an e-mail, a web page, a
//                               tool result) as "untrusted" segments with
//                               their origin
//   io.verdict/intent           {when_case, action_name}: the timing the
//                               host's configuration states for the tool, and
//                               where in a user turn the user named the action
//   io.verdict/locations        argument -> {segment, span}: where each
//                               argument's value stands, as text, in the
//                               segments (spans in Unicode code points)
//   io.verdict/conversation_id  the host's conversation id
//   io.verdict/new_request      true on the first gated call of a user turn
//
// Locations are found by text: the first occurrence of a value, as whole
// tokens, in the user's turns, else in the untrusted text. A value found
// nowhere gets no location and is asked of the user. A location is a
// pointer, not a claim: verdictd checks that the segment is "user", that the
// span's text denotes the value and that it starts and ends on token edges,
// and a location in an untrusted segment grounds nothing.
//
// Usage with the OpenAI Agents SDK (@openai/agents):
//
//   const convo = new Conversation({ id: "c_123", tools: {
//     "bank.transfer": { whenCase: "immediate", actionWords: ["send", "pay", "transfer"] },
//   }});
//   convo.user("send 900 to 110-222-333 for the invoice");
//   const server = new GatewayServer({ ..., toolMetaResolver: convo.resolver() });
//
// The framework calls the resolver before every MCP tool call and sends what
// it returns as the call's _meta.

// Trust labels. "user" is the only label that grounds; anything else is text
// the user did not type.
export const TRUST_USER = "user";
export const TRUST_UNTRUSTED = "untrusted";

// The _meta keys mcpgate reads on a tools/call.
export const META_INSTRUCTION = "io.verdict/instruction";
export const META_INTENT = "io.verdict/intent";
export const META_LOCATIONS = "io.verdict/locations";
export const META_CONVERSATION_ID = "io.verdict/conversation_id";
export const META_NEW_REQUEST = "io.verdict/new_request";

// Conversation is the host's record of what was said and read, in order.
export class Conversation {
  // id: the host's conversation id. tools: the gated tools ("<server>.<tool>"
  // as the gateway lists them), each with the timing the host states
  // (whenCase: "immediate", ...) and the words whose first occurrence in a
  // user turn names the action (actionWords). Only these calls carry _meta.
  // A gated tool left out gets none: each of its values is asked of the
  // user. An entry without whenCase or actionWords leaves that part to the
  // operator's preset in mcpgate, or to the user.
  constructor({ id, tools = {} }) {
    if (typeof id !== "string" || id === "") throw new TypeError("Conversation: id is required");
    this.id = id;
    this.tools = tools;
    this.segments = [];
    this.turnStarted = false;
  }

  // user records a turn the user typed. It starts a new request: the next
  // gated call says new_request, so that verdictd does not carry questions
  // of the previous request over.
  user(text) {
    this.segments.push({ text: String(text), trust: TRUST_USER });
    this.turnStarted = true;
  }

  // read records text the agent read that the user did not type: a fetched
  // e-mail, a page, a tool result. origin says where it came from, for the
  // record.
  read(text, origin) {
    if (typeof origin !== "string" || origin === "") throw new TypeError("Conversation.read: origin is required");
    this.segments.push({ text: String(text), trust: TRUST_UNTRUSTED, origin });
  }

  // meta builds the _meta of one call of toolName with args, or returns
  // undefined for a tool the host does not list as gated: the conversation
  // is sent only with the calls the gate reads it for, and a read call does
  // not use up the turn's new_request.
  meta(toolName, args) {
    const tool = this.tools[toolName];
    if (!tool) return undefined;
    const meta = {
      [META_INSTRUCTION]: this.segments.map((s) => ({ ...s })),
      [META_CONVERSATION_ID]: this.id,
    };
    if (this.turnStarted) {
      meta[META_NEW_REQUEST] = true;
      this.turnStarted = false;
    }
    const locations = {};
    for (const [name, value] of Object.entries(args ?? {})) {
      const at = this.locate(valueText(value));
      if (at) locations[name] = at;
    }
    if (Object.keys(locations).length > 0) meta[META_LOCATIONS] = locations;
    const intent = {};
    if (tool.whenCase) intent.when_case = tool.whenCase;
    for (const word of tool.actionWords ?? []) {
      const at = this.locate(word, TRUST_USER);
      if (at) {
        intent.action_name = at;
        break;
      }
    }
    if (Object.keys(intent).length > 0) meta[META_INTENT] = intent;
    return meta;
  }

  // locate finds text as whole tokens: in the user's turns first, then (when
  // only is not given) in the untrusted text, latest segment first within
  // each.
  locate(text, only) {
    if (text === undefined || text === "") return undefined;
    const order = [TRUST_USER, TRUST_UNTRUSTED].filter((t) => !only || t === only);
    for (const trust of order) {
      for (let i = this.segments.length - 1; i >= 0; i--) {
        const s = this.segments[i];
        if ((s.trust === TRUST_USER) !== (trust === TRUST_USER)) continue;
        const span = tokenSpan(s.text, text);
        if (span) return { segment: i, span };
      }
    }
    return undefined;
  }

  // resolver is the OpenAI Agents SDK's toolMetaResolver for MCP servers.
  resolver() {
    return ({ toolName, arguments: args }) => this.meta(toolName, args);
  }
}

// valueText is how a scalar argument would appear in text; objects and
// arrays are not located.
function valueText(v) {
  switch (typeof v) {
    case "string":
      return v;
    case "number":
      return Number.isSafeInteger(v) ? String(v) : undefined;
    default:
      return undefined;
  }
}

const wordChar = /[\p{L}\p{N}\p{M}]/u;

// tokenSpan returns the [start, end) code-point span of the first occurrence
// of needle in text that neither starts nor ends inside a word.
function tokenSpan(text, needle) {
  const hay = Array.from(text);
  const pin = Array.from(needle);
  outer: for (let i = 0; i + pin.length <= hay.length; i++) {
    for (let j = 0; j < pin.length; j++) {
      if (hay[i + j] !== pin[j]) continue outer;
    }
    const before = i > 0 ? hay[i - 1] : "";
    const after = i + pin.length < hay.length ? hay[i + pin.length] : "";
    if ((before && wordChar.test(before)) || (after && wordChar.test(after))) continue;
    return [i, i + pin.length];
  }
  return undefined;
}
