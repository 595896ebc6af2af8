package mcpgate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/askform"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/tracing"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
	"github.com/verdictgate/verdict/visible"
	"github.com/verdictgate/verdict/waiting"
)

// inputKey is the id of the one input request a gated call asks.
const inputKey = "answers"

const nothingDone = " Nothing was done."

// callState is a gated call in progress: the preflight request as it
// grows with the user's answers, and the form last shown. Between MRTR
// rounds it waits in the pending store under its requestState nonce.
type callState struct {
	Principal  string
	Exposed    string
	ArgsDigest string
	Req        api.Request
	Form       *askform.Form
	Rounds     int
	// Connect is the decided call that waits for the user to connect an account at the
	// tool's server (connect.go); nil while the call is asked with forms.
	Connect *verdictCall
	expiry  time.Time
}

func (s *callState) intent() *api.Intent {
	if s.Req.Intent == nil {
		s.Req.Intent = &api.Intent{}
	}
	return s.Req.Intent
}

// whenCase is the timing the request carries, or "".
func (s *callState) whenCase() string {
	var wc string
	if s.Req.Intent != nil {
		_ = json.Unmarshal(s.Req.Intent.WhenCase, &wc)
	}
	return wc
}

// setWhenCase makes wc the request's timing.
func (s *callState) setWhenCase(wc string) {
	s.intent().WhenCase, _ = json.Marshal(wc)
}

// toolHandler serves the MCP library's tools/call of name, made for the principal principal
// names. A relayed question's answers, which carry a relay requestState, continue the
// upstream's call (continueRelay) before the gate sees them.
func (g *Gateway) toolHandler(name string, principal func(*mcp.CallToolRequest) string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := sessionHost(req, principal(req))
		if strings.HasPrefix(req.Params.RequestState, relayPrefix) {
			return g.continueRelay(ctx, h, name), nil
		}
		// The host's trace context, if it sent one in _meta, is linked, not the parent: the
		// call's trace is the gateway's own, so that no host chooses the trace id verdictd
		// and the executor record the call under (another user's, say).
		link := trace.SpanContextFromContext(tracing.ExtractMeta(context.Background(), req.Params.Meta))
		ctx, span := g.tr.StartLinked(ctx, link, "tools/call "+name, trace.SpanKindServer, append(g.tr.Principal(h.principal),
			attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", name))...)
		defer span.End()
		res, err := g.call(ctx, name, h, req.Params)
		if res != nil {
			for k, attr := range map[string]string{api.MetaOutcome: "verdict.outcome", api.MetaRecordID: "verdict.record_id",
				api.MetaExecutionRecord: "verdict.execution_record_id"} {
				if v, ok := res.Meta[k].(string); ok {
					span.SetAttributes(attribute.String(attr, v))
				}
			}
			if r, ok := res.Meta[api.MetaReason].(string); ok && res.IsError {
				tracing.Fail(span, r)
			}
		}
		return res, err
	}
}

// toolError is a result the host shows as a failed call: text in the
// user's terms, and the reason code in _meta. The text can quote a value,
// a validation detail or a name from the tool's definition: what a host
// would not draw of it is marked (visible.Text).
func toolError(reason, text string, meta ...any) *mcp.CallToolResult {
	text = visible.Text(text)
	m := mcp.Meta{api.MetaReason: reason}
	for i := 0; i+1 < len(meta); i += 2 {
		m[meta[i].(string)] = meta[i+1]
	}
	return &mcp.CallToolResult{IsError: true, Meta: m, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// call serves a tools/call of name, which h made with p.
func (g *Gateway) call(ctx context.Context, name string, h host, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	start := time.Now()
	if h.principal == "" {
		return toolError(api.ReasonUnauthenticated, "This connection is not tied to a user."+nothingDone), nil
	}
	// The policy is read once: the whole call runs under the class it
	// has now, whatever a reload does meanwhile, and the next call sees
	// the reloaded one.
	pol := g.policy()
	x, refused := g.callable(pol, name)
	if refused != nil {
		return refused, nil
	}
	return g.serve(ctx, start, pol.Tool(x.Server, x.Tool).EffectiveClass(), name, x, h, p)
}

// callable is the tool name names, as the policy pol offers it, or the tool error that
// refuses its call.
func (g *Gateway) callable(pol *policy.Policy, name string) (exposedTool, *mcp.CallToolResult) {
	x, ok := g.lookup(name)
	if !ok || pol.Servers[x.Server] == nil {
		// A listing not yet updated after a reload may still offer a tool
		// of a server the policy dropped: it is not called.
		return x, toolError(api.ReasonToolUnavailable, "This action is not available at the moment."+nothingDone)
	}
	if pol.Pins[x.Server] != nil {
		// The listing offered may predate a change the catalog has seen since: the pin is
		// checked against the definition listed now, which is the one that would run.
		if t, listed := g.catalog.Lookup(x.Server, x.Tool); !listed || pol.CheckPin(x.Server, x.Tool, t.Digest) != nil {
			return x, toolError(api.GateDefinitionUnpinned, "This action is not available at the moment: it changed and waits for the operator's review."+nothingDone)
		}
	}
	return x, nil
}

// serve serves a call of x, begun at start, that the policy read for it puts in class.
func (g *Gateway) serve(ctx context.Context, start time.Time, class policy.Class, name string, x exposedTool, h host, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	// A requestState continues a gated call: it carries the user's
	// answers, which only the gate turns into the call that runs. A
	// reload that made the tool read or reversible meanwhile must not
	// forward the model's arguments in their place.
	continuation := p.RequestState != "" || len(p.InputResponses) > 0
	if continuation && g.mode == ModeEnforce {
		class = policy.Irreversible // the class the call started under
	}
	if class != policy.Irreversible {
		res := g.forward(ctx, h, x, p.Arguments)
		g.count(class, res, start)
		return res, nil
	}
	if g.mode == ModeObserve {
		res := g.observe(ctx, name, x, h, p)
		g.count(class, res, start)
		return res, nil
	}
	res, err := g.gated(ctx, name, x, h, p)
	if res != nil {
		g.count(class, res, start)
	}
	return res, err
}

// count counts a finished tools/call by class and result, and the time since start it took.
func (g *Gateway) count(class policy.Class, res *mcp.CallToolResult, start time.Time) {
	result := "ok"
	switch {
	case res.NeedsInput() || res.InputRequests != nil:
		result = "input_required"
	case res.IsError:
		result = "error"
		if r, ok := res.Meta[api.MetaReason].(string); ok {
			result = r
		}
	}
	g.metrics.calls.WithLabelValues(string(class), result).Inc()
	g.metrics.callDur.WithLabelValues(string(class)).Observe(time.Since(start).Seconds())
}

// forward calls the tool over the gateway's own upstream connection. A
// question or sampling request the server sends during the call is relayed
// to h while the tool is pass-through, and its progress and log messages
// reach h's session (see relay).
func (g *Gateway) forward(ctx context.Context, h host, x exposedTool, args json.RawMessage) *mcp.CallToolResult {
	if slices.Contains(g.cfg.UserServers, x.Server) {
		return g.userRead(ctx, x, args)
	}
	rc := g.newRelayCall(ctx, h, x)
	ctx, cancel := g.forwarding(ctx, x.Server)
	defer cancel()
	cl, err := g.upstreamFor(ctx, h, x.Server)
	if err != nil {
		return toolError(api.ReasonUpstreamFailed, "The service could not be reached."+nothingDone)
	}
	// Made without the MCP library's client where the server's revision and the
	// tool allow it (upstream.Client.Call), with the definition the catalog
	// holds now; the answer is the same either way.
	tc := upstream.ToolCall{Tool: x.Tool, Args: args, PassThrough: true, Relay: rc.up}
	if t, ok := g.catalog.Lookup(x.Server, x.Tool); ok {
		tc.Definition = t.Raw
	}
	res, _, err := cl.Call(ctx, tc)
	return g.relay(ctx, cl, h, x, args, res, err, rc)
}

// errForwardTimeout ends a forwarded request whose forward_timeout passed.
var errForwardTimeout = errors.New("forward_timeout passed")

// forwarding bounds a request forwarded to server by its forward_timeout.
// The request's own context ends it too when the host goes away. Either
// way the upstream client sends the server a cancellation for it.
func (g *Gateway) forwarding(ctx context.Context, server string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, g.cfg.forwardTimeout(server), errForwardTimeout)
}

// timedOut reports whether ctx, made by forwarding, ended by its forward_timeout.
func timedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errForwardTimeout) }

// hostResult is an upstream's result as the gateway answers its own host
// with it: content, structured content, isError and _meta, and nothing of
// how the upstream answered the gateway. The result type the upstream
// sent (a 2026-07-28 field) is left for the SDK to set by the host's
// revision, and the upstream's own serverInfo is dropped: the host talks
// to the gateway, which presents the server by its deployment id.
func hostResult(in *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: in.Content, StructuredContent: in.StructuredContent, IsError: in.IsError,
		Meta: withoutServerInfo(in.Meta)}
}

// observe records what the gate would decide, then forwards the call.
func (g *Gateway) observe(ctx context.Context, name string, x exposedTool, h host, p *mcp.CallToolParamsRaw) *mcp.CallToolResult {
	outcome, recordID := outcomeInvalidRequest, ""
	st, errRes := g.newCallState(h.principal, name, x, p)
	if errRes == nil {
		rec, err := g.verdictd.preflight(ctx, &st.Req)
		if err != nil {
			outcome = outcomePreflightError
			g.log.Warn("observe: preflight failed", "server", x.Server, "tool", x.Tool, "error", err.Error())
		} else {
			outcome, recordID = rec.Outcome, rec.RecordID
			g.metrics.preflights.WithLabelValues(rec.Outcome).Inc()
		}
	}
	if outcome != api.OutcomeVerdictIssued {
		g.metrics.wouldBlock.WithLabelValues(outcome).Inc()
	}
	g.log.Warn("observe: forwarding an irreversible call without a verdict",
		"server", x.Server, "tool", x.Tool, "would_be_outcome", outcome, "record_id", recordID)
	return g.forward(ctx, h, x, p.Arguments)
}

// gated runs one round of a gated call: a first call, or the retry of an
// input_required result with the user's answers.
func (g *Gateway) gated(ctx context.Context, name string, x exposedTool, h host, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	var st *callState
	if p.RequestState != "" {
		digest, err := canonical.DigestJSON(argsObject(p.Arguments))
		if err != nil {
			return toolError(api.ReasonArgumentsInvalid, "The request's details could not be read exactly."+nothingDone), nil
		}
		if st, err = g.resume(ctx, h.principal, name, digest, p.RequestState); errors.Is(err, waiting.ErrStateUnavailable) {
			return g.storeRefusal(err), nil
		} else if err != nil {
			code, _ := stateReason(err)
			return g.stateRefused("request state refused", name, code, err), nil
		}
		if st.Connect != nil {
			// The call waited for the user to connect an account: its verdict is decided.
			return g.connected(ctx, st, p.InputResponses), nil
		}
		resp, _ := p.InputResponses[inputKey].(*mcp.ElicitResult)
		if resp == nil || resp.Action != "accept" {
			return declined(st.Form), nil
		}
		if err := st.answer(resp.Content); err != nil {
			return toolError(api.ReasonDeclined, "You did not approve the request."+nothingDone), nil
		}
	} else {
		if len(p.InputResponses) > 0 {
			g.metrics.stateRefused.WithLabelValues(api.ReasonStateMissing).Inc()
			return toolError(api.ReasonStateMissing, "Answers were sent without the request they answer."+nothingDone), nil
		}
		var errRes *mcp.CallToolResult
		if st, errRes = g.newCallState(h.principal, name, x, p); errRes != nil {
			return errRes, nil
		}
		release, res := g.admitCall(ctx, h, st)
		if res != nil {
			return res, nil
		}
		defer release()
	}
	return g.settle(ctx, h, x, st)
}

// resume verifies a requestState and takes its continuation: MAC, expiry,
// binding to this principal, tool and argument object, then single use.
func (g *Gateway) resume(ctx context.Context, principal, name, digest, tok string) (*callState, error) {
	b, err := g.takeState(ctx, g.store, principal, name, digest, tok)
	if err != nil {
		return nil, err
	}
	st, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateInvalid, err)
	}
	// The continuation must agree with what the token binds, whatever the
	// store it came from.
	if st.Principal != principal || st.Exposed != name || st.ArgsDigest != digest {
		return nil, ErrStateMismatch
	}
	return st, nil
}

// takeState verifies the requestState tok and takes its entry from store: MAC, expiry, binding
// to this principal, tool and argument digest, then single use (ErrStateReplayed when store
// holds no entry for it).
func (g *Gateway) takeState(ctx context.Context, store waiting.Store, principal, tool, digest, tok string) ([]byte, error) {
	claims, err := g.codec.Open(tok, g.now())
	if err == nil {
		err = claims.Check(principal, tool, digest)
	}
	if err != nil {
		return nil, err
	}
	b, err := store.Take(ctx, principal, claims.Nonce)
	if errors.Is(err, waiting.ErrNotFound) {
		return nil, ErrStateReplayed
	}
	return b, err
}

// stateReason is the reason code of err, a refused requestState; false for an error that is
// not one of the refusals (a store's), whose code is then state_invalid.
func stateReason(err error) (string, bool) {
	for _, e := range []error{ErrStateInvalid, ErrStateExpired, ErrStateMismatch, ErrStateReplayed} {
		if errors.Is(err, e) {
			return e.Error(), true
		}
	}
	return ErrStateInvalid.Error(), false
}

// stateRefused is the tool error of a requestState refused for code, counted by its code and
// logged as msg.
func (g *Gateway) stateRefused(msg, name, code string, err error) *mcp.CallToolResult {
	g.metrics.stateRefused.WithLabelValues(code).Inc()
	g.log.Warn(msg, "tool", name, "reason", code, "error", err.Error())
	return toolError(code, "This answer cannot be accepted: it does not belong to a question asked for this request, or it was already used. Please start the request again."+nothingDone)
}

// settle runs preflights until a verdict, a question for the user or a
// refusal. Older clients are asked in place (elicitation/create) and the
// loop goes on; 2026-07-28 clients get an input_required result.
func (g *Gateway) settle(ctx context.Context, h host, x exposedTool, st *callState) (*mcp.CallToolResult, error) {
	for {
		if st.Rounds >= g.maxRound {
			return toolError(api.ReasonTooManyRounds, "The needed details could not be settled in a reasonable number of questions."+nothingDone), nil
		}
		st.Rounds++
		rec, err := g.verdictd.preflight(ctx, &st.Req)
		ae, _ := errors.AsType[*client.Error](err)
		switch {
		case ae != nil && ae.Status == http.StatusTooManyRequests && ae.Code == api.CodeConversationLimit:
			g.log.Warn("preflight refused: conversation limit", "server", x.Server, "tool", x.Tool)
			return toolError(api.CodeConversationLimit, "Too many requests of yours are open at once. Finish or abandon one, or try again later."+nothingDone), nil
		case ae != nil && ae.Status == http.StatusTooManyRequests && ae.Code == api.CodeApprovalLimit:
			g.log.Warn("preflight refused: approval limit", "server", x.Server, "tool", x.Tool)
			return toolError(api.CodeApprovalLimit, "Too many requests of yours wait for an approval. Wait until they are decided, or try again later."+nothingDone), nil
		case ae != nil && ae.Status == http.StatusConflict && ae.Code == api.CodeApprovalChanged:
			// The call's approval was decided while verdictd decided the call: nothing was
			// issued, and the same preflight acts on the decision (a round, so bounded).
			g.log.Info("preflight again: the call's approval changed", "server", x.Server, "tool", x.Tool)
			continue
		case err != nil:
			g.log.Error("preflight", "server", x.Server, "tool", x.Tool, "error", err.Error())
			return toolError(api.ReasonPreflightFailed, "The safety check could not be run right now."+nothingDone), nil
		}
		g.metrics.preflights.WithLabelValues(rec.Outcome).Inc()
		g.log.Info("preflight", "server", x.Server, "tool", x.Tool, "outcome", rec.Outcome, "record_id", rec.RecordID, "round", st.Rounds)
		st.Req.NewRequest = false // only the first round may reset the conversation
		if rec.Server != x.Server || rec.Tool != x.Tool {
			return toolError(api.ReasonPreflightFailed, "The safety check answered for another request."+nothingDone), nil
		}
		switch rec.Outcome {
		case api.OutcomeVerdictIssued:
			vc, ok := verdictCallOf(rec)
			if !ok {
				return toolError(api.ReasonPreflightFailed, "The safety check gave an incomplete answer."+nothingDone), nil
			}
			return g.run(ctx, h, st, vc)
		case api.OutcomeAskUser:
		default:
			return refusal(rec), nil
		}
		if ra := consoleApproval(rec, h.forms()); ra != nil {
			// The approvals are given in the console: the host answers only the rest, and
			// once nothing else is asked the call waits on the approval.
			if rest := hostQuestions(rec); len(rest.Questions) > 0 {
				rec = rest
			} else {
				res, next := g.awaitConsole(ctx, h, rec, ra)
				if !next {
					return res, nil
				}
				continue
			}
		}
		f, err := askform.Build(rec, st.whenCase(), g.cfg.MaxDraftBytes)
		if errors.Is(err, askform.ErrDraftTooLong) {
			g.log.Warn("draft too long for a form", "record_id", rec.RecordID, "error", err.Error())
			return toolError(api.ReasonDraftTooLong, "The drafted text is too long to be shown to you for review here."+nothingDone,
				api.MetaRecordID, rec.RecordID), nil
		}
		if err != nil {
			g.log.Warn("question not askable", "record_id", rec.RecordID, "error", err.Error())
			return toolError(api.ReasonNotAskable, "A detail is needed that cannot be asked for in this app."+nothingDone,
				api.MetaRecordID, rec.RecordID), nil
		}
		st.Form = f
		if h.byResult {
			return g.inputRequired(ctx, st, rec)
		}
		switch {
		case h.form == capsUndeclared:
			g.log.Warn("elicitation: client did not declare form elicitation", "record_id", rec.RecordID)
			return toolError(api.ReasonElicitation, "This app cannot ask you for the missing details."+nothingDone,
				api.MetaRecordID, rec.RecordID), nil
		case !h.inPlace():
			// An older client's request that named no session: the stateless
			// handler served it with made-up initialize parameters, so what
			// the client declared is not known here, and nothing could carry
			// elicitation/create back to it anyway.
			g.log.Warn("elicitation: older client without a session; its capabilities are unknown", "record_id", rec.RecordID)
			return toolError(api.ReasonElicitation, "This app's connection cannot carry the questions needed (it has no session with the gateway); reconnecting the app may fix this."+nothingDone,
				api.MetaRecordID, rec.RecordID), nil
		}
		ectx, espan := g.tr.Start(ctx, "elicitation", trace.SpanKindClient,
			attribute.String("mcp.method.name", "elicitation/create"), attribute.Int("verdict.round", st.Rounds))
		res, err := h.ss.Elicit(ectx, f.Params())
		espan.End()
		if err != nil {
			g.log.Warn("elicitation", "record_id", rec.RecordID, "error", err.Error())
			return toolError(api.ReasonElicitation, "The questions needed could not be shown to you."+nothingDone,
				api.MetaRecordID, rec.RecordID), nil
		}
		if res.Action != "accept" {
			return declined(f), nil
		}
		if err := st.answer(res.Content); err != nil {
			return toolError(api.ReasonDeclined, "You did not approve the request."+nothingDone), nil
		}
	}
}

// What a client declared about form elicitation. The zero value is the one
// that asks nothing.
const (
	capsUnknown    = iota // it did not initialize on this connection
	capsForm              // it can be asked with a form
	capsUndeclared        // it declared no form elicitation
)

// host is the host of a call as the gate code and a pass-through call's
// relaying ask it, whatever served the call: a 2026-07-28 host is asked with
// input_required results, and what else it can be asked is in its request's
// declared capabilities; an older host is asked in place through its
// session, as it declared at initialize. sessionHost makes one of the MCP
// library's request; a request served without the library (only a
// 2026-07-28 host's) can make its own from its _meta, with no session. The
// zero host asks nothing: no session, no form, no URL, so that no code
// reaches a session a host does not have.
type host struct {
	// principal is the user the call is made for; "" when the connection
	// names none.
	principal string
	// req is the MCP library's request, whose stream carries the server's
	// progress and log messages, and whose params continue a relayed
	// question; nil for a call served without the library (see plain.go).
	req *mcp.CallToolRequest
	// byResult: a 2026-07-28 host, asked with input_required results.
	byResult bool
	// urlInput reports whether a 2026-07-28 host's request declared URL-mode
	// elicitation; nil, as false. Asked only when the executor names a page to
	// connect an account: reading the library's request's capabilities decodes
	// its _meta again, which no other call needs.
	urlInput func() bool
	// ss is an older host's session, through which it is asked in place; nil
	// for a 2026-07-28 host.
	ss *mcp.ServerSession
	// form and url are what an older host declared about form (capsForm, …)
	// and URL-mode elicitation; capsUnknown and false for a 2026-07-28 host.
	form int
	url  bool
}

// sessionHost is the host of req, a call the MCP library served for principal.
func sessionHost(req *mcp.CallToolRequest, principal string) host {
	if req.Session == nil {
		// No session to read a declaration from: asked by result, never in place.
		return host{principal: principal, req: req, byResult: true, urlInput: func() bool { return false }}
	}
	if supportsInputRequests(req.Session) {
		return host{principal: principal, req: req, byResult: true, urlInput: func() bool { return urlInputRequests(req) }}
	}
	return host{principal: principal, req: req, ss: req.Session, form: formElicitation(req.Session), url: urlElicitation(req.Session)}
}

// forms reports whether h can be asked with a form: by an input_required
// result, or in place.
func (h host) forms() bool { return h.byResult || h.inPlace() }

// inPlace reports whether h can be asked with a form in place (elicitation/create).
func (h host) inPlace() bool { return !h.byResult && h.ss != nil && h.form == capsForm }

// urlInPlace reports whether h can be sent to a page in place (elicitation/create, mode url).
func (h host) urlInPlace() bool { return !h.byResult && h.ss != nil && h.url }

// formElicitation reports what the client of ss declared in initialize.
// An elicitation capability without modes ({}, as 2025-06-18 declares
// it) means form.
func formElicitation(ss *mcp.ServerSession) int {
	ip := ss.InitializeParams()
	switch {
	case ip == nil || ip.Capabilities == nil:
		return capsUnknown
	case ip.Capabilities.Elicitation == nil:
		return capsUndeclared
	case ip.Capabilities.Elicitation.Form == nil && ip.Capabilities.Elicitation.URL != nil:
		return capsUndeclared
	}
	return capsForm
}

// supportsInputRequests reports whether the client speaks 2026-07-28 or
// later: the SDK synthesizes no initialize parameters for those.
func supportsInputRequests(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= "2026-07-28"
}

// inputRequired parks st under a fresh nonce and returns the form with a
// requestState bound to it.
func (g *Gateway) inputRequired(ctx context.Context, st *callState, rec *api.Record) (*mcp.CallToolResult, error) {
	var ids []string
	for _, q := range rec.Questions {
		ids = append(ids, q.QuestionID)
	}
	return g.park(ctx, st, ids, rec.RecordID, mcp.InputRequestMap{inputKey: st.Form.Params()})
}

// park keeps st in the state store under a fresh nonce until its requestState, which binds
// the questions asked, comes back, and returns the input_required result that asks asks with
// it. A store that refuses it ends the call with a tool error that carries recordID.
func (g *Gateway) park(ctx context.Context, st *callState, questionIDs []string, recordID string, asks mcp.InputRequestMap) (*mcp.CallToolResult, error) {
	nonce, err := newNonce()
	if err != nil {
		return nil, fmt.Errorf("mcpgate: nonce: %w", err)
	}
	now := g.now()
	st.expiry = now.Add(g.stateTTL)
	claims := StateClaims{Principal: st.Principal, Tool: st.Exposed, ArgsDigest: st.ArgsDigest,
		Expiry: st.expiry.Unix(), Nonce: nonce, QuestionIDs: questionIDs}
	tok, err := g.codec.Seal(claims)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: seal request state: %w", err)
	}
	b, err := encodeState(st)
	if err != nil {
		return nil, err
	}
	if err := g.store.Put(ctx, waiting.Entry{Nonce: nonce, Principal: st.Principal, Data: b, Expiry: st.expiry}, g.limits); err != nil {
		return g.storeRefusal(err, api.MetaRecordID, recordID), nil
	}
	return &mcp.CallToolResult{InputRequests: asks, RequestState: tok}, nil
}

// verdictCall is a verdict and the call it binds, as the gateway hands them to the executor. A
// call the executor refused for want of the user's account at the tool's server waits as one
// while the user connects it (connect.go): nothing of it was spent, and the same verdict is
// presented again.
type verdictCall struct {
	RecordID string          `json:"record_id"`
	Verdict  string          `json:"verdict"`
	Args     json.RawMessage `json:"arguments"`
	// Server is the tool's server: whose account a refusal for want of one waits for.
	Server string `json:"server,omitempty"`
}

// verdictCallOf is rec's verdict and the call it binds; false when rec lacks either.
func verdictCallOf(rec *api.Record) (verdictCall, bool) {
	// The arguments go as the record holds them: read with their numbers' exact text, they
	// encode to the same canonical digest the verdict binds.
	args, err := json.Marshal(rec.CallArguments)
	if rec.Verdict == nil || rec.CallArguments == nil || err != nil {
		return verdictCall{}, false
	}
	return verdictCall{RecordID: rec.RecordID, Verdict: *rec.Verdict, Args: args, Server: rec.Server}, true
}

// execute hands the verdict and the call it binds to the executor. The
// POST is not tied to the host's request: abandoning it halfway would
// leave an execution whose outcome nobody learns. A refusal for want of
// the user's account at the tool's server returns, beside the tool error
// that gives the page to connect it, the page (checked by connectPage):
// the caller may ask the host to open it instead.
func (g *Gateway) execute(ctx context.Context, vc verdictCall) (res *mcp.CallToolResult, connect string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.CallTimeout.Or(DefaultCallTimeout)+10*time.Second)
	defer cancel()
	x, err := g.executor.execute(ctx, vc.Verdict, vc.Args)
	if err != nil {
		g.log.Error("execute", "record_id", vc.RecordID, "error", err.Error())
		return toolError(api.ReasonExecutionUnknown, executorNoAnswer, api.MetaRecordID, vc.RecordID), ""
	}
	g.log.Info("execute", "record_id", vc.RecordID, "status", x.Status, "decision", x.Execution.Decision, "reason", x.reason(), "execution_record", x.Execution.RecordID,
		"message", x.Error.Message)
	if refusedBeforeRunning(x) && x.reason() == api.ExecutionReasonCredentialRequired && x.Error.ConnectURL != "" {
		return g.connectRefusal(vc, x)
	}
	return g.executed(vc, x), ""
}

// executed is what the user is told of the executor's answer x to vc.
func (g *Gateway) executed(vc verdictCall, x *execution) *mcp.CallToolResult {
	var res *mcp.CallToolResult
	if len(x.Result) > 0 && string(x.Result) != "null" {
		res = &mcp.CallToolResult{}
		if err := json.Unmarshal(x.Result, res); err != nil {
			res = nil
		} else if res = hostResult(res); res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
	}
	meta := []any{api.MetaRecordID, vc.RecordID, api.MetaExecutionRecord, x.Execution.RecordID}
	switch {
	case x.Status == http.StatusOK && res != nil:
		res.Meta[api.MetaRecordID] = vc.RecordID
		res.Meta[api.MetaExecutionRecord] = x.Execution.RecordID
		return res
	case x.Status == http.StatusBadGateway && res != nil:
		// The tool ran and failed: its own words are the answer.
		res.IsError = true
		res.Meta[api.MetaReason] = api.ReasonExecutionFailed
		res.Meta[api.MetaExecutionRecord] = x.Execution.RecordID
		return res
	case x.Status == http.StatusGatewayTimeout:
		return toolError(api.ReasonExecutionUnknown, "The action may or may not have been carried out: the service did not answer in time. It will not be retried automatically; please check before asking again.",
			meta...)
	case x.Status == http.StatusBadGateway && x.Execution.Decision == api.ExecutionNotExecuted && x.reason() == api.ExecutionReasonUpstreamUnavailable:
		return toolError(api.ReasonExecutionNotSent, "The action was not carried out: the service could not be reached, so nothing was sent to it."+nothingDone, meta...)
	case x.Status == http.StatusBadGateway && x.Execution.Decision == api.ExecutionFailed:
		return toolError(api.ReasonExecutionFailed, "The action could not be carried out by the service ("+x.reason()+").", meta...)
	case refusedBeforeRunning(x):
		return toolError(api.ReasonExecutionRefused, "The action was not carried out: the execution service refused it ("+refusalDetail(x)+")."+nothingDone, meta...)
	default:
		// A 500, a 200 without a result, a proxy's 502 or 503: nothing in
		// the answer says whether the tool ran, so the gateway cannot say
		// that nothing was done.
		g.log.Error("execute: unexpected answer", "record_id", vc.RecordID, "status", x.Status, "decision", x.Execution.Decision, "reason", x.reason())
		if x.Execution.RecordID == "" {
			meta = meta[:2]
		}
		return toolError(api.ReasonExecutionUnknown, executorNoAnswer, meta...)
	}
}

// refusalDetail is the executor's refusal as the user is told it: its reason, and for an
// expired verdict what the executor's message adds (when it expired, and that a new preflight
// is needed, which making the call again runs).
func refusalDetail(x *execution) string {
	if x.reason() == string(verdict.Expired) && x.Error.Code == x.reason() {
		if d, ok := strings.CutPrefix(x.Error.Message, "verdict refused: "+x.reason()+": "); ok && d != "" {
			return x.reason() + ": " + d
		}
	}
	return x.reason()
}

// executorNoAnswer is what the user is told when the executor's answer
// does not say what became of the call.
const executorNoAnswer = "The action may or may not have been carried out: the execution service did not answer. It will not be retried automatically; please check before asking again."

// refusedBeforeRunning reports whether the executor answered that it
// refused the verdict and ran nothing: a not_executed record with one of
// the statuses it refuses with (403 a verification refusal, 409 a replay,
// 503 a catalog or nonce store not available now). Only then may the user
// be told that nothing was done.
func refusedBeforeRunning(x *execution) bool {
	if x.Execution.Decision != api.ExecutionNotExecuted {
		return false
	}
	switch x.Status {
	case http.StatusForbidden, http.StatusConflict, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// refusal explains a non-askable outcome in the user's terms. It names no
// tool and carries no verdict.
func refusal(rec *api.Record) *mcp.CallToolResult {
	var text string
	reason := rec.Outcome
	switch rec.Outcome {
	case api.OutcomeHold:
		var why []string
		for _, u := range rec.Unmet {
			what := askform.Humanize(u.SlotID)
			switch u.Reason {
			case api.UnmetInvalidValue:
				why = append(why, "the "+what+" is not valid"+detail(u.Detail))
			case api.UnmetInvalidPayload:
				why = append(why, "the details together are not valid"+detail(u.Detail))
			case api.UnmetRequiredNull:
				why = append(why, "the "+what+" has no value")
			case api.UnmetDraftHiddenCharacters:
				why = append(why, "the "+what+" drafted for you holds characters you would not see, so it was not shown to you for approval"+detail(u.Detail))
			default:
				why = append(why, "a required condition is not met: "+what+detail(u.Detail))
			}
		}
		if len(why) == 0 {
			why = []string{"a required check did not pass"}
		}
		text = "This cannot be done: " + strings.Join(why, "; ") + "." + nothingDone
	case api.OutcomeExhausted:
		text = cmp.Or(rec.Gate.UserMessage, "The needed details could not be settled after several tries. Please start a new request.") + nothingDone
	case api.OutcomeDefinitionRepair:
		text = "This action cannot be checked at the moment: its definition needs attention from the operator." + nothingDone
	case api.OutcomeSystemLookup:
		text = "A required check could not be completed right now; please try again later." + nothingDone
	case api.OutcomeDeferred:
		text = "Only actions meant to happen now are carried out from here; scheduled, conditional and recurring requests are not." + nothingDone
	case api.OutcomeRefuse:
		// The console approval of exactly this call was denied, expired, or lapsed: its
		// reason is the call's own.
		reason = cmp.Or(rec.Gate.Detail, reason)
		text = "An approver declined this request." + nothingDone
		switch rec.Gate.Detail {
		case api.CodeApprovalExpired:
			text = "The request was not approved in time." + nothingDone
		case api.CodeApprovalLapsed:
			text = "The request's approval was not used in time, or no longer holds because the policy or the tool changed since; " +
				"making the request again asks for a new approval." + nothingDone
		}
	default:
		text = "This request could not be carried out." + nothingDone
	}
	return toolError(reason, text, api.MetaOutcome, rec.Outcome, api.MetaRecordID, rec.RecordID)
}

func detail(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

// hostIntent is the shape of _meta["io.verdict/intent"].
type hostIntent struct {
	WhenCase   string        `json:"when_case,omitempty"`
	ActionName *api.Location `json:"action_name,omitempty"`
}

// newCallState builds the first preflight of a call from its arguments,
// the host's _meta and the operator's config. A malformed _meta entry is
// refused, never ignored: it may carry the only grounding the user gave.
func (g *Gateway) newCallState(principal, name string, x exposedTool, p *mcp.CallToolParamsRaw) (*callState, *mcp.CallToolResult) {
	args := argsObject(p.Arguments)
	digest, err := canonical.DigestJSON(args)
	if err != nil {
		return nil, toolError(api.ReasonArgumentsInvalid, "The request's details could not be read exactly ("+err.Error()+")."+nothingDone)
	}
	fields, err := topLevel(args)
	if err != nil {
		return nil, toolError(api.ReasonArgumentsInvalid, "The request's details are not a set of named values."+nothingDone)
	}
	st := &callState{Principal: principal, Exposed: name, ArgsDigest: digest,
		Req: api.Request{Principal: principal, Server: x.Server, Tool: x.Tool}}

	var (
		hi   hostIntent
		locs map[string]api.Location
	)
	bad := func(key string, err error) *mcp.CallToolResult {
		return toolError(api.ReasonMetaInvalid, fmt.Sprintf("The app sent malformed %s (%v).", key, err)+nothingDone)
	}
	var conv string
	for _, m := range []struct {
		key string
		dst any
	}{{api.MetaInstruction, &st.Req.Instruction.Segments}, {api.MetaIntent, &hi}, {api.MetaLocations, &locs}, {api.MetaConversationID, &conv}} {
		if err := metaValue(p.Meta, m.key, m.dst); err != nil {
			return nil, bad(m.key, err)
		}
	}
	if conv != "" {
		st.Req.ConversationID = conv
		if err := metaValue(p.Meta, api.MetaNewRequest, &st.Req.NewRequest); err != nil {
			return nil, bad(api.MetaNewRequest, err)
		}
	} else {
		// Each call is its own conversation: the ask ceilings then bound
		// the rounds of one call, and a host that wants them to span
		// calls sends its own conversation id.
		n, err := newNonce()
		if err != nil {
			return nil, toolError(api.ReasonBusy, "The request could not be started."+nothingDone)
		}
		st.Req.ConversationID = "mcpgate-" + n
	}

	for _, f := range fields {
		c := api.Candidate{Field: f.name, Value: f.value}
		if l, ok := locs[f.name]; ok {
			seg, span := l.Segment, l.Span
			c.Segment, c.Span = &seg, &span
		}
		st.Req.Candidates = append(st.Req.Candidates, c)
	}
	for arg := range locs {
		if !slices.ContainsFunc(fields, func(f field) bool { return f.name == arg }) {
			return nil, bad(api.MetaLocations, fmt.Errorf("%q is not an argument of the call", arg))
		}
	}

	tc := g.cfg.Tools[x.Server+"/"+x.Tool]
	in := st.intent()
	in.ActionName = hi.ActionName
	switch {
	case hi.WhenCase != "":
		st.setWhenCase(hi.WhenCase)
	case tc.WhenCase != "":
		st.setWhenCase(tc.WhenCase)
	}
	if in.ActionName == nil && tc.ActionNamePreset != "" {
		v, _ := json.Marshal(tc.ActionNamePreset)
		in.ActionNamePreset = &api.PreSet{Value: api.Value{Set: true, V: json.RawMessage(v)}, Trust: "user", Origin: "mcpgate:operator"}
	}
	for k, v := range g.cfg.Principals[principal].PreSetData {
		raw, err := json.Marshal(v)
		if err != nil {
			continue
		}
		if st.Req.PreSetData == nil {
			st.Req.PreSetData = map[string]api.PreSet{}
		}
		st.Req.PreSetData[k] = api.PreSet{Value: api.Value{Set: true, V: json.RawMessage(raw)}, Trust: "user", Origin: "mcpgate:config"}
	}
	return st, nil
}

// metaValue decodes _meta[key] into dst strictly; an absent key leaves
// dst alone. Member names must match exactly: encoding/json would read
// "Trust" or "truſt" (long s) as "trust", so a segment the host's other
// readers see as untrusted could reach the gate as the user's.
func metaValue(meta mcp.Meta, key string, dst any) error {
	v, ok := meta[key]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return apijson.UnmarshalStrict(b, dst)
}

type field struct {
	name  string
	value json.RawMessage
}

type fieldList []field

// topLevel splits a JSON object into its members, keeping each value's
// exact bytes (a number is never re-encoded).
func topLevel(obj json.RawMessage) (fieldList, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	var out fieldList
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, field{name: name, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return out, nil
}
