// Package mcpgate owns the MCP gateway: an MCP server that any MCP host
// connects to instead of the real tool servers. It re-exposes every tool of
// the policy's servers and puts each irreversible call through the gate —
// a preflight at verdictd, the user's own answers through MCP elicitation,
// and execution only by the executor on a signed verdict.
//
// # What the host sees
//
// Each server the gateway connects to has an endpoint of its own,
// /mcp/<server> over HTTP (--stdio --server <server> over stdio), where its
// tools keep the names the server gives them: a host configured for the
// server alone keeps its config, prompts and allow-lists. The aggregated
// endpoint, /mcp (--stdio alone), offers every policy server's tools as
// "<server>.<tool>" (the deployment's server id, never the server's
// self-reported name). A server id holds no '.', so the first '.' ends it
// and two servers' tools never collide. At both, a tool has the
// description, inputSchema, outputSchema and annotations exactly as the
// server listed them, and a call is the same call: the gate knows it by
// its aggregated name, which its requestState binds. The listing follows the servers: tools are added,
// replaced and removed as they change upstream. It follows the policy too
// (see Policy reload).
//
//   - read and reversible tools (policy class) are forwarded over the
//     gateway's own upstream connection. In enforce mode that connection
//     should carry read-only credentials (servers: overrides the policy's
//     tools_from per server for exactly this).
//   - irreversible tools, and tools the policy does not classify, go
//     through the gate.
//
// A pass-through tool keeps its own questions. When its server asks for
// input during the call — an input_required result (2026-07-28), or an
// elicitation/create (earlier revisions) — the question is relayed to the
// host as the server put it and the answer, decline and cancel included,
// goes back. A host that can be asked in place (stdio, an older host in an
// HTTP session, form elicitation declared) is asked with
// elicitation/create; a 2026-07-28 host over HTTP gets the gateway's own
// input_required with a requestState sealed like a gated call's (see
// requestState), its tool marked as a relay and its continuation kept
// apart from the gated calls' store, so the two never continue each
// other. Every round checks that the policy in force still classifies the
// tool read or reversible. An elicitation/create names no call, so over
// the gateway's shared connection it is relayed only while exactly one
// call is in flight there. Bounds: form elicitations only, at most 8
// questions of at most 16 KiB per round, max_rounds rounds, state_ttl per
// answer; anything else ends the call with upstream_input_required. A
// gated call's server never asks: the executor's connections declare no
// elicitation and treat input_required as a failure.
//
// A relayed question says who asks (relayscreen.go): the host is shown
// "[server <id>] " before its message and before each title and
// description of its form, a form the gateway's own questions never use,
// with the characters a host does not draw made visible. A question that
// uses the gateway's own wording (its opening line, a "Note:" line, the
// attribution itself; reservedWording) anywhere the host shows text is
// refused with relay_refused_wording, and one that asks for a secret
// (secretWords, format password) with relay_refused_secret unless the
// tool's policy says relay: {allow_secrets: true}. A refused question is
// never shown; the server is not answered with a decline it could take
// for the user's: an input_required round is not continued, an
// elicitation/create gets an error, and the call ends with the reason
// whatever the server answers after.
//
// A result, forwarded or executed, is the gateway's own answer: its
// content, structured content, isError and _meta, without the upstream's
// serverInfo in _meta (the host talks to the gateway, which presents the
// server by its deployment id) and without the result type the upstream
// sent (the SDK sets resultType for 2026-07-28 hosts only).
//
// # Resources, prompts and completion
//
// A server's resources, resource templates and prompts are offered as it
// lists them (every page), and follow its listings as its tools do
// (notifications/resources/list_changed and prompts/list_changed
// included); resources/read, prompts/get and completion/complete are
// passed on to the server whose item they name, under its
// forward_timeout, and its answer, its own JSON-RPC errors included, is
// the host's. resources/subscribe subscribes the gateway at the server
// (once for all hosts, ended with the last host's unsubscribe), and the
// server's notifications/resources/updated reaches only the sessions
// subscribed to the URI. At a server's own endpoint everything keeps its
// URI or name. At the aggregated endpoint a prompt is "<server>.<prompt>",
// as a tool is; a resource or template keeps its URI, and one that two
// servers list is offered by neither there (a read could not say whose it
// is), only at each server's endpoint. None of this is gated: none of it
// runs an action. What a resource or prompt returns is the server's
// content, like a tool's result: a host that hands it to the gate labels
// it untrusted, and untrusted text grounds nothing. The endpoints declare
// resources (with subscriptions), prompts and completion whatever the
// servers behind them have, since a server may list them only later.
//
// # Time limits
//
// Every request the gateway forwards to a server has a deadline,
// forward_timeout (default 2m, at most 1h; forward_timeouts per server),
// the time a user takes to answer the server's questions in place
// included. When it passes, or when the host goes away first, the server
// is sent notifications/cancelled for the request (the library's client
// sends it for calls made through it; the gateway's own plain calls send
// it themselves, since a closed response is no cancellation), and a host
// still waiting is answered upstream_timeout: the action may or may not
// have happened, and it is not retried. A forwarded call holds nothing
// another call waits for, so one user's hung call never delays another's.
//
// # Following the servers
//
// A server that announces notifications/tools/list_changed, or whose
// connection is re-established, is listed again at once, and the
// gateway's listing follows as soon as that listing is in: the catalog
// reports every listing that differs from the one it replaces (a tool
// added or removed, a definition's bytes changed), and the gateway then
// syncs its own listing without waiting for refresh_interval. A listing
// that fails, or finds the same definitions, changes nothing: the last
// good listing stays exposed for up to three refresh_intervals, after
// which the periodic sync withdraws the server's tools until it lists
// again. Every refresh_interval all servers are listed again in any
// case, so a server that changes its tools without announcing it is
// followed within one interval.
//
// The MCP server library announces each change of the gateway's listing
// (an added, replaced or removed tool) with notifications/tools/list_changed
// to the hosts it can reach: a stdio host, whatever its revision, a
// 2026-07-28 host over HTTP that holds a subscriptions/listen stream, and
// an older host over HTTP whose session holds its event stream (GET). A
// host that holds no stream sees the change at its next tools/list.
//
// # Policy reload
//
// The policy file is reloaded when its content changes (checked every
// policy_poll, default 2s, as verdictd does) and on SIGHUP, so that a tool
// the operator reclassifies (read to irreversible, or a class removed) is
// gated from the next call on, not from the next restart: a gateway that
// kept forwarding it would hold a more permissive class than the file.
//
//   - The new file is parsed and validated whole before anything changes.
//     A file that does not load (unreadable, not YAML, not a valid
//     policy) leaves the policy in force, is logged at error level with
//     the reason, and counts mcpgate_policy_reloads_total{result="error"}
//     once (the watcher does not retry the same content; SIGHUP does).
//   - A good file is put in force with one pointer swap and counts
//     result="ok"; mcpgate_policy_info{version} names the version in
//     force. SIGHUP on an unchanged file counts as ok too.
//   - A call reads the policy once, when it starts, and runs to its end
//     under that class; the next call sees the new one. The answers to a
//     gated call's questions (a tools/call with a requestState) continue
//     that gated call even if the tool has become read or reversible
//     meanwhile: forwarding then would run the model's arguments in place
//     of the ones the user gave.
//   - A reload connects to nothing. Tools of a server the policy dropped
//     are withdrawn from the listing at once, and a call that still names
//     one is refused (unknown tool, or tool_unavailable when it raced the
//     withdrawal), never forwarded or gated; its connection stays, so a
//     policy that brings the server back exposes it again. A server the
//     policy added is not exposed until the gateway restarts, and a
//     server whose tools_from changed keeps the connection made at start;
//     both are logged at warning level.
//   - The gateway and verdictd reload on their own, so for up to a poll
//     interval they may hold different versions. A call the gateway gates
//     while verdictd still classifies the tool read or reversible comes
//     back not_gated and is refused with that reason: it is not forwarded
//     until the gateway itself holds the permissive class.
//   - Hosts are told of the listing change as of any other (see
//     Following the servers).
//   - The policy's pins hold tools back: a listed tool whose definition
//     is not its pin (or has none, on a server pinned whole) is withheld
//     from the listing (mcpgate_tools_withheld{server}), so the host's
//     model never reads the changed description, and a call naming it is
//     refused definition_unpinned, checked against the definition the
//     catalog holds at the call. A policy that pins it again exposes it.
//   - Only the policy file is reloaded: the gateway's own config is read
//     once, at start.
//
// # A gated call
//
//  1. The model's arguments become candidates, one per top-level argument,
//     without locations: the gateway does not see the conversation, so
//     none of them grounds a value. They say what the intended call is;
//     every value still has to come from a designated source.
//  2. POST /v1/preflight at verdictd.
//  3. ask_user: the questions become one elicitation form. Value questions
//     become properties reduced from questions[].schema to the MCP form
//     schema (type, minLength/maxLength, format, enum, minimum/maximum);
//     no property ever has a default, so the model's value is never
//     pre-filled and review cannot turn into a click-through. An approval
//     is a boolean property (true approves; false, the box left unticked,
//     declines), and what it approves
//     (questions[].shown) is written into the form message and the
//     property description; the answer is sent as
//     {question_id, approved: true, value: questions[].value}. A branch
//     question is a string enum of the options. A value question that
//     offers the value from last time (questions[].value) shows that value
//     in the message ("Last time the to account was: …") and in the
//     description of a required choice, a string enum "keep" / "change",
//     followed by an optional field for a new value: "keep" alone answers
//     {question_id, approved: true, value: <the value this form showed>},
//     so a baseline that changed meanwhile is never what is kept; "change"
//     with a new value answers that value; anything else (no choice, a
//     change without a value, keep beside a new value) leaves the question
//     open, and verdictd asks it again. A review_draft question (a drafted
//     field: a memo, a message body) is never an empty text field: the
//     message carries the whole draft, announced with its length and
//     placed after everything the gateway says, so that the model's text
//     cannot pose as a line of the gateway's own, and with every character
//     a person would not see (visible.Hidden: default-ignorable code
//     points such as variation selectors and zero-width characters,
//     bidirectional controls, controls other than newline and tab, private
//     use, unassigned) written as ⟦U+XXXX⟧ and counted, so that the host
//     cannot draw other text than what runs (the whole message, field
//     titles and descriptions, and tool errors are written the same way); a
//     draft holding such characters reaches no form unless the policy
//     allows them (draft_hidden_characters); its property is a
//     required string enum "approve" / "refuse". "approve" answers
//     {question_id, approved: true, value: <the draft>}; anything else ends
//     the call with reason declined. Drafts longer together than
//     max_draft_bytes (default 16 KiB) are never shown in part: the call
//     ends with reason draft_too_long and nothing runs (a console that can
//     show long content by URL-mode elicitation is for later). A Gate-1 restatement is
//     answered in the user's own words: the text becomes a new
//     trust-"user" instruction segment and intent.action_name points at
//     all of it; a timing question is an enum of the four when_cases.
//     A question whose schema is not one flat primitive is not asked in a
//     lossy way: the call ends with reason not_askable.
//     2026-07-28 clients receive an input_required result (one input
//     request, id "answers") with a requestState; older clients are asked
//     in place with elicitation/create, over stdio or on the call's stream
//     in their HTTP session (see Sessions). A client that did not declare
//     form elicitation, or an older client's HTTP request that names no
//     session (its declared capabilities are then unknown, and nothing
//     could carry the question back), ends with elicitation_unavailable.
//     Decline, cancel, or an approval left unticked ends the call with
//     reason declined, worded as a request not approved when the form
//     asked for approval: nothing runs.
//  4. The answers go back as user_answers with their question ids, added
//     to those of earlier rounds, and the preflight runs again — at most
//     max_rounds (default 8) preflights per call.
//  5. verdict_issued: POST /v1/execute at the executor with the verdict and
//     the record's call_arguments (not the model's arguments: the call that
//     runs is the one the gate settled), and the executor's MCP result is
//     the call's result. The POST is not cancelled with the host's request,
//     and it is never retried. The executor's answer decides what the user
//     is told: a 200 with a result is the call's result; a 502 with the
//     tool's result, or with a failed record, is execution_failed; a
//     refusal with a not_executed record (403, 409, 503) is
//     execution_refused; a 502 with a not_executed record of reason
//     upstream_unavailable (the executor could not reach the tool's server
//     and sent it nothing) is execution_not_sent. Those two are the only
//     answers after a verdict that say nothing was done. Anything else — no
//     answer, a 504, a 500, a 200 without a
//     result, a 502 or 503 without the executor's record (a proxy's, or the
//     executor shutting down) — is execution_outcome_unknown: the action
//     may or may not have happened, and the user is asked to check before
//     asking again.
//  6. Any other outcome is a tool error (isError) that says in the user's
//     terms what is missing or why it cannot be done. It never names the
//     tool and never carries a verdict. _meta holds io.verdict/reason,
//     io.verdict/outcome and io.verdict/record_id for the host's logs.
//     A refuse outcome (an approver denied exactly this call in the
//     console, or its approval expired, or lapsed unused) has the
//     refusal's own reason, approval_denied, approval_expired or
//     approval_lapsed.
//
// # Approvals in the console
//
// A record whose approvals its tool's policy sends to the console carries
// the call's pending approval (docs/approvals.md). When the host cannot
// give them — the policy's approval channels leave out host, or the host
// declared no form elicitation — the host is asked the rest of the round
// (a draft's review) without the approval questions, and then:
//
//   - a host that declared URL-mode elicitation (2025-11-25) and is asked
//     in place gets elicitation/create with mode "url", elicitationId the
//     approval id and url console_url + "/approvals/" + the id, with a
//     message saying what is to be approved and where. Once the user
//     accepted, the gateway long-polls verdictd's GET
//     /v1/approvals/{id}?wait= with its caller token (and the host's own
//     token, with identity), sends notifications/elicitation/complete
//     when the approval is decided or expires, and runs the preflight
//     again: approved, it issues the verdict and the call executes as
//     always; denied, it refuses (approval_denied). An approval that
//     expires ends the call with approval_timeout; a declined URL with
//     declined.
//   - any other host (no URL elicitation, a 2026-07-28 host, a failed
//     URL elicitation) gets a tool error, approval_pending_elsewhere,
//     whose text gives the approval's page. The same call made again in
//     the same conversation (io.verdict/conversation_id) after the
//     decision finds it.
//
// # requestState
//
// The token is "v1.<payload>.<mac>": the payload (base64url JSON) binds the
// principal, the exposed tool name, the canonical (RFC 8785) digest of the
// call's arguments, the ids of the questions asked, an expiry (state_ttl,
// default 10m) and a 128-bit nonce; the MAC is HMAC-SHA256 under the key in
// state_key_file (at least 32 bytes). The call's progress (the preflight
// request with the host's segments and the answers so far, the form shown)
// waits in the state store under the nonce, and is taken out on first use:
// a second use of the same token is request_state_replayed. A token whose
// MAC fails is request_state_invalid (it is checked before anything in it
// is read), one past its expiry request_state_expired, one presented by
// another principal or with other arguments request_state_mismatch, and
// answers sent without a token request_state_missing.
//
// # Waiting requests
//
// The state store (the state section of the config) keeps continuations
// encoded: the request in the wire encoding verdictd reads (read back with
// package apijson), the form in the gateway's own, one encoding for every
// backend, so the bytes counted are the bytes kept, instruction segments
// included. Kind memory (the default) keeps them in the process: one
// replica, and a restart voids outstanding tokens (the user starts over).
// Kind etcd keeps them in an etcd cluster, named with the keys verdictd's
// state_store and the executor's nonce_store use, so that any replica with
// the same state key can answer a question another replica asked: keys
// under prefix + "mcpgate/" (hashes of principal and nonce only) with a
// lease of state_ttl, taken by one delete that returns what it removed, so
// exactly one taker wins across replicas.
//
// Every bound refuses with its own reason, counted in
// mcpgate_state_refused_total{reason}:
//
//   - rate_limited: the principal started more first-round gated calls
//     than its token bucket allows (call_burst, refilled at
//     calls_per_minute). Continuations of a call already asked are not
//     limited.
//   - busy_principal: the principal already has principal_pending
//     continuations waiting (default 16), or principal_bytes of them
//     (default 8 MiB).
//   - state_too_large: the continuation alone is larger than
//     principal_bytes.
//   - busy: the store holds max_pending continuations (default 10000) or
//     max_bytes of them (default 256 MiB).
//   - state_unavailable: the store gave no definite answer (etcd down or
//     slower than its request_timeout). Nothing is asked that could not be
//     answered, and nothing passes.
//
// A host of an earlier revision is asked in place (elicitation/create), and
// its call's state waits in the gateway's memory, outside the store, until
// the user answers. Such calls are held to the same bounds, in a pool of
// their own in each process, at their encoded size when they start: a
// principal cannot get around its share by speaking an older revision.
//
// The rate and the principal's share are checked before verdictd is asked,
// so a flood writes no ask_user record per call; every bound is checked
// again, exactly, when the continuation is stored. A principal's share may
// be at most half of each global bound (the config refuses more), and at
// the defaults it is 16 of 10000 and 8 MiB of 256 MiB: the store reaches
// busy only when 625 principals hold their full count share, or 32 their
// full byte share, at once. One principal's flood, or a handful of
// colluding principals', therefore never makes another principal's call
// busy. The rate limit bounds how often a principal can empty its share
// (answering or declining) and fill it again, and so the preflights its
// flood costs verdictd.
//
// With etcd, a principal's count and bytes are exact across replicas (the
// store commits only if none of the principal's keys changed since it read
// them); the global count is read before the commit and may be passed by
// the puts of other principals in flight at that moment; the global byte
// bound is left to etcd's quota (--quota-backend-bytes), an etcd refusing
// for space refusing the call state_unavailable. A lease outlives
// state_ttl by up to a twenty-fourth of it, during which an expired
// continuation still counts against its principal (never for it). Every
// replica must hold the same state key: a token sealed by one replica
// opens on another only then.

// # _meta a host may send on tools/call
//
// Hosts that see the conversation can give the gate what it needs to
// ground values and the intent. The host, not the model, must write these:
// the trust labels are the host's statement of who typed what.
//
//	"io.verdict/instruction":     [{"text": "...", "trust": "user"|"untrusted", "origin": "..."}]
//	"io.verdict/intent":          {"when_case": "immediate", "action_name": {"segment": 0, "span": [0, 10]}}
//	"io.verdict/locations":       {"amount": {"segment": 0, "span": [5, 12]}}
//	"io.verdict/conversation_id": "c_77"
//	"io.verdict/new_request":     true
//
// The params of every tools/call are read on the bytes the host sent,
// before anything decodes them, on every transport: a member name that
// appears twice in one object anywhere in them (compared after unescaping
// and under Unicode case folding, nesting bounded at 64 levels) ends the
// call with arguments_invalid when the repeat is inside arguments and
// meta_invalid otherwise, whatever the tool's class. A library's decoding
// into a map keeps the last of two values, so without this
// {"trust": "untrusted", "trust": "user"} would reach the gate as the
// user's while verdictd and every log read it as untrusted. Over HTTP a
// body with a repeated name outside a tools/call's params is refused whole
// (HTTP 400, data io.verdict/reason meta_invalid). The _meta member
// io.verdict/refused is reserved: the check hands its finding to the tool
// handler under it, and a host that sends it has its call refused.
//
// A location attaches to the candidate of the argument it names; its value
// is always the call's own argument. A malformed entry ends the call with
// meta_invalid rather than being ignored. The keys are read on the first
// round of a call only. Without a conversation id each call is its own
// conversation (so verdictd's ask ceilings bound one call's rounds; a host
// that wants them to span calls sends its own id).
//
// # Intent without a host: operator decisions
//
// Gate 1 needs the timing (C1) and the user's name for the action (C2).
// When the host sends no io.verdict/intent:
//
//   - tools.<server/tool>.when_case in the gateway config is sent as the
//     timing, if the operator set it; otherwise the user is asked.
//   - tools.<server/tool>.action_name_preset is sent as
//     intent.action_name_preset with trust "user" (origin
//     "mcpgate:operator"), if the operator set it. This is the operator
//     vouching that a call of this tool is what the user calls the action:
//     it satisfies C2 (and C3, if the phrase is one of the policy's
//     actions) without the user's words. Leave it unset to have the user
//     describe the action in their own words instead.
//
// Values the user stored in advance (principals.<id>.pre_set_data) are
// sent as pre_set_data with trust "user" and origin "mcpgate:config".
//
// # Sessions
//
// The HTTP endpoint (/mcp, streamable HTTP) serves two kinds of host.
// 2026-07-28 hosts are served statelessly: every request stands alone and
// questions travel as input_required results. Hosts of earlier revisions
// (2025-06-18 and 2025-11-25 among them: every host on the official
// TypeScript SDK 1.x) can be asked only with elicitation/create, a request
// the gateway sends while their tools/call is open; the SDK carries it on
// that call's stream only within a session, and only a session remembers
// the capabilities the host declared. So an initialize offering a revision
// before 2026-07-28 is answered by the SDK's stateful handler with an
// Mcp-Session-Id, and every request naming a session goes there; anything
// else goes to the stateless handler. The stateless handler answers with
// application/json (a stateless call's answer is one message), the
// stateful one with an event stream; the library logs the start and end
// of a stateless request's session only at warning level and above.
//
// A 2026-07-28 host's tools/call of a read or reversible tool, the bulk of
// pass-through traffic, is answered by the gateway itself rather than by
// the library's stateless handler (mcpgate_plain_calls_total counts them),
// when it knows what the library would do with the request: the body is
// decoded once with unknown, case-mismatched and repeated member names
// refused, the headers (Mcp-Protocol-Version 2026-07-28, Mcp-Method,
// Mcp-Name, Content-Type, Accept, no session, no Mcp-Param header) and
// _meta (the revision, client info and capabilities, nothing else) are
// what the library accepts, the tool is in the current listing, read or
// reversible in the policy in force, its pin holds, it binds no argument
// to a header and needs no scope, and tracing is off. The raw _meta screen
// runs first, as for every request. The call is then forwarded exactly as
// the library's handler would have forwarded it (the same forward, relay
// and counters) and answered with the bytes the library would write. Any
// other request — a gated tool, a batch, a session, an older revision, a
// continuation with a requestState, anything unknown — goes to the
// library, before anything is forwarded: this path never refuses a
// request and never takes one the library would refuse. Requests of
// older hosts in a session are the library's, which owns their session
// ids; serving them here would mean keeping its session state twice.
//
// Sessions are bounded: at most max_sessions (default 1000) are open, and
// one without a request for session_idle_timeout (default 30m) is ended;
// the host's next request gets 404 and the host initializes again. An
// initialize past the bound is refused with HTTP 503 and a JSON-RPC error
// saying so (data io.verdict/reason session_limit), and counted in
// mcpgate_sessions_refused_total{reason="session_limit"}; a 2026-07-28
// host needs no session and is never refused for it. Shutdown ends every
// session.
//
// A session lives in the memory of the replica that answered its
// initialize, whatever the state store. With several gateway
// replicas behind a load balancer, requests carrying an Mcp-Session-Id
// must reach the replica that issued it (affinity on that header): on
// another replica the session is unknown (404) and the host starts over.
//
// # Readiness
//
// /readyz is 200 once the first listing of every policy server the
// gateway is connected to has been tried and at least one of them is
// listed now (a server whose listings failed for longer than three
// refresh_interval has its tools withdrawn, and is named in
// unlisted_servers; readiness follows upstream.Catalog.Readiness), and
// verdictd's and the executor's own /readyz answer 200, and (with etcd)
// the state store answers: without them no irreversible call can
// complete. mcpgate_ready and mcpgate_upstream_listed show the catalog's
// part. Under --stdio a
// configured listen address is bound before stdio is served, and a port
// that cannot be bound stops the gateway: the policy watcher runs with the
// HTTP server, and a gateway serving stdio without it would keep a tool
// reclassified as irreversible passing through.
//
// # Principals
//
// Over HTTP (/mcp, streamable HTTP) every request needs
// Authorization: Bearer <token>. Without an identity section the token's
// SHA-256 is looked up in principals.<id>.token_sha256 in constant time
// and names the principal; a request without one is answered 401 in the
// error envelope with WWW-Authenticate: Bearer realm="mcpgate" (and
// error="invalid_token" when a token was sent). With one, the gateway is an OAuth 2.1 resource
// server (docs/identity.md): the token is an access token of one of the
// configured issuers, verified by package identity, and the principal is
// its issuer-qualified id (issuer#subject). Its RFC 9728 metadata is
// served at /.well-known/oauth-protected-resource (and at that path
// followed by the resource's own path); a refused request is answered 401
// with WWW-Authenticate: Bearer resource_metadata="...", 403 for a scope
// an issuer requires, and 503 while an issuer cannot be reached, never by
// falling back to static tokens, which the identity section excludes. A
// tools entry's scopes are required of the token for each call of the
// tool: a call without them is refused (insufficient_scope, with the
// scopes in _meta io.verdict/required_scopes) before anything is decided;
// the tool stays listed. The token is forwarded to verdictd in the
// Verdict-Subject-Token header, so that verdictd, not the gateway, decides
// whose call it is.
// Over stdio (--stdio) the principal is stdio_principal.
//
// # Modes
//
// enforce (the default) holds no write path: irreversible calls reach
// their server only through the executor, with a verdict. observe forwards
// every call over the gateway's own connection, runs one preflight per
// irreversible call to record what the gate would have decided (logged at
// warning level with the record id), and counts
// mcpgate_would_block_total{outcome} for every outcome but verdict_issued.
// It needs both mode: observe in the config and the --observe flag; either
// alone stops the gateway at start. It logs a warning at start and exports
// mcpgate_observe_mode 1. The executor is unchanged in both modes and
// accepts nothing but a verdict.
//
// # Metrics
//
// mcpgate_observe_mode, mcpgate_would_block_total{outcome},
// mcpgate_calls_total{class,result}, mcpgate_plain_calls_total (the
// pass-through calls answered without the library, also counted in
// mcpgate_calls_total), mcpgate_preflights_total{outcome},
// mcpgate_request_state_refused_total{reason},
// mcpgate_state_refused_total{reason}, mcpgate_pending_requests,
// mcpgate_pending_bytes, mcpgate_policy_info{version}, mcpgate_policy_reloads_total{result},
// mcpgate_auth_refusals_total{reason} (identity only), mcpgate_sessions,
// mcpgate_sessions_refused_total{reason}, and the Go runtime and process
// collectors. No label takes a principal,
// an argument value or a nonce.
//
// # Limits, stated plainly
//
// Form answers arrive as JSON numbers decoded to float64: an integer answer
// of magnitude 2^53 or more is refused rather than rounded (ask for such
// identifiers as strings). A policy reload does not connect to servers the policy added:
// restart the gateway for those. An upstream elicitation/create is not
// relayed to a 2026-07-28 host over HTTP, nor while another call is in
// flight on the same upstream connection. A server that changes its tools
// without announcing it is followed only at the next refresh_interval,
// and a host that cannot be reached with an announcement keeps calling
// with the definition it last listed until it lists again.
package mcpgate
