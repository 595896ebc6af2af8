package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/waiting"
)

// Relaying what a pass-through tool's server says during the call.
//
// A read or reversible tool is the upstream server's business: when its
// server asks for input during the call (elicitation/create from a server
// of an earlier revision, an input_required result from a 2026-07-28
// server), the question goes to the host as the server put it, attributed
// to the server, and the answer, decline and cancel included, goes back to
// the server. A question in the gateway's own words, or one that asks for a
// secret the policy does not allow, is not shown at all (relayscreen.go).
// A sampling request (sampling/createMessage) goes to a host that declared
// sampling the same way, in place, attributed and bounded
// (screenSampling). The server's progress and its log messages reach the
// session of the host that made the call, and no other (see
// upstream.Relay for how each is tied to its call). A gated call never
// reaches this code: the executor's connection declares no elicitation
// and no sampling, and refuses input_required, so a server cannot ask the
// user or the user's model on the gate's behalf. Every relayed round
// checks that the policy in force still classifies the tool pass-through.

const (
	// maxRelayForm bounds one relayed question, as JSON.
	maxRelayForm = 16 << 10
	// maxRelayQuestions bounds the questions of one relayed round.
	maxRelayQuestions = 8
	// maxUpstreamState bounds the requestState of an upstream the gateway
	// keeps while a 2026-07-28 host answers.
	maxUpstreamState = 64 << 10
	// relayPrefix starts every requestState of a relayed question, so that
	// its continuation never reaches the gated path's state.
	relayPrefix = "relay."
	// relayToolPrefix is put before the exposed name in a relay token's
	// claims: a relay token presented as a gated call's state (or the
	// other way round) fails the binding check.
	relayToolPrefix = "relay:"
)

// passThrough reports whether the policy in force forwards x.
func (g *Gateway) passThrough(x exposedTool) bool {
	pol := g.policy()
	if pol.Servers[x.Server] == nil {
		return false
	}
	c := pol.Tool(x.Server, x.Tool).EffectiveClass()
	return c == policy.Read || c == policy.Reversible
}

// relayCall is what relaying keeps for one host call across its rounds:
// the questions and sampling requests relayed so far, the first question
// refused (see screenQuestion), which ends the call whatever the server
// answers after, and what the upstream client passes on during each
// round.
type relayCall struct {
	rounds  atomic.Int32
	refused atomic.Pointer[relayRefusal]
	up      *upstream.Relay
}

// newRelayCall returns the relaying of one host call of x. ctx is the tool
// handler's: the library puts what is sent under it on the call's own
// stream. A call the gateway serves itself (h.req nil: a 2026-07-28 host
// answered with one JSON message) has no stream to carry progress or log
// messages, and is never asked in place.
func (g *Gateway) newRelayCall(ctx context.Context, h host, x exposedTool) *relayCall {
	rc := &relayCall{}
	rc.up = &upstream.Relay{Ask: g.asker(h, x, rc), Sample: g.sampler(h, x, rc)}
	if h.req == nil {
		return rc
	}
	ss, p := h.req.Session, h.req.Params
	if tok := p.GetProgressToken(); tok != nil {
		// The server is sent a token of the upstream client's own, unique to
		// this call; its progress comes back here under the host's.
		rc.up.Progress = func(n *mcp.ProgressNotificationParams) {
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n.Progress, Total: n.Total, Message: n.Message})
		}
	}
	// Log honours the level the host set for its session (logging/setLevel),
	// or named in the request (2026-07-28), and sends nothing when it set
	// none.
	rc.up.Log = func(m *mcp.LoggingMessageParams) {
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: m.Level, Logger: relayLogger(x.Server, m.Logger), Data: m.Data})
	}
	if level, ok := p.Meta[mcp.MetaKeyLogLevel].(string); ok {
		rc.up.LogLevel = mcp.LoggingLevel(level)
	}
	return rc
}

// relayLogger names the logger of a relayed log message: the server's
// deployment id, then the server's own name for it, if any. A server id
// holds no '/', so no server can name another's logger.
func relayLogger(server, logger string) string {
	if logger == "" {
		return server
	}
	return server + "/" + logger
}

// relayable checks an upstream's questions and returns them as the host is
// shown them: form elicitations only (sampling, roots and URL elicitations
// are not relayed), each within maxRelayForm, at most maxRelayQuestions,
// each screened (a *relayRefusal when one is refused).
func (g *Gateway) relayable(x exposedTool, reqs mcp.InputRequestMap) (map[string]*mcp.ElicitParams, error) {
	if len(reqs) == 0 || len(reqs) > maxRelayQuestions {
		return nil, fmt.Errorf("%d questions", len(reqs))
	}
	out := map[string]*mcp.ElicitParams{}
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		p, ok := reqs[id].(*mcp.ElicitParams)
		if !ok {
			return nil, fmt.Errorf("question %q is not an elicitation", id)
		}
		q, err := g.relayQuestion(x, p)
		if err != nil {
			return nil, fmt.Errorf("question %q: %w", id, err)
		}
		out[id] = q
	}
	return out, nil
}

// relayQuestion checks one question of x's server and returns it as the host
// is shown it: a form elicitation within maxRelayForm, screened
// (screenQuestion) under the policy in force for x's tool.
func (g *Gateway) relayQuestion(x exposedTool, p *mcp.ElicitParams) (*mcp.ElicitParams, error) {
	if p == nil || (p.Mode != "" && p.Mode != "form") {
		return nil, errors.New("not a form")
	}
	if b, err := json.Marshal(p); err != nil || len(b) > maxRelayForm {
		return nil, fmt.Errorf("form larger than %d bytes", maxRelayForm)
	}
	return screenQuestion(x.Server, p, g.policy().Tool(x.Server, x.Tool).AllowsSecretQuestions())
}

// logRefusal logs a refused question: its reason and what in it, never its
// text.
func (g *Gateway) logRefusal(x exposedTool, r *relayRefusal) {
	g.log.Warn("upstream question refused", "server", x.Server, "tool", x.Tool, "reason", r.reason, "detail", r.detail)
}

// asker is what forward gives the upstream client for an
// elicitation/create of the call's server: the host asked in place,
// within the round bound, while the tool stays pass-through, with the
// question as screenQuestion shows it. A refused question is answered
// with an error, never with a decline or a cancel the server could take
// for the user's, and ends the call (rc.refused) whatever the server
// answers after.
func (g *Gateway) asker(h host, x exposedTool, rc *relayCall) upstream.Asker {
	return func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		if err := g.admitInPlace(x, rc, h.inPlace); err != nil {
			return nil, err
		}
		q, err := g.relayQuestion(x, p)
		if r, ok := errors.AsType[*relayRefusal](err); ok {
			g.logRefusal(x, r)
			rc.refused.CompareAndSwap(nil, r)
			return nil, fmt.Errorf("question refused: %s", r.reason)
		}
		if err != nil {
			return nil, err
		}
		return g.askHost(ctx, h, x, q)
	}
}

// admitInPlace decides whether a request the server sends during the call
// (a question, a sampling request) may be put to the host in place: the
// policy in force still forwards the tool, the call has rounds left
// (questions and sampling requests count alike, up to max_rounds), and can
// says the host's session takes it now.
func (g *Gateway) admitInPlace(x exposedTool, rc *relayCall, can func() bool) error {
	switch {
	case !g.passThrough(x):
		return errors.New("the tool is no longer pass-through")
	case int(rc.rounds.Add(1)) > g.maxRound:
		return errors.New("too many questions")
	case !can():
		// A 2026-07-28 host over HTTP is asked with input_required,
		// which an open request of the server's cannot wait for.
		return errors.New("the host cannot be asked in place")
	}
	return nil
}

// sampler is what forward gives the upstream client for a
// sampling/createMessage of the call's server: admitted as a question is
// (admitInPlace), to a host that declared sampling, and sent as
// screenSampling makes it; only the host's message goes back.
func (g *Gateway) sampler(h host, x exposedTool, rc *relayCall) upstream.Sampler {
	return func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		if err := g.admitInPlace(x, rc, h.samplesInPlace); err != nil {
			return nil, err
		}
		q, err := screenSampling(x.Server, p)
		if err != nil {
			g.log.Warn("upstream sampling request not relayed", "server", x.Server, "tool", x.Tool, "error", err.Error())
			return nil, err
		}
		res, err := hostRound(ctx, g, x, "sampling request", func(ctx context.Context) (*mcp.CreateMessageResult, error) {
			return h.ss.CreateMessage(ctx, q)
		})
		if err != nil {
			return nil, err
		}
		return &mcp.CreateMessageResult{Content: res.Content, Model: res.Model, Role: res.Role, StopReason: res.StopReason}, nil
	}
}

// samplesInPlace reports whether h can be sent sampling/createMessage now:
// an older host over stdio or in an HTTP session, which declared sampling.
func (h host) samplesInPlace() bool {
	if h.byResult || h.ss == nil {
		return false
	}
	ip := h.ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Sampling != nil
}

// askHost puts one relayed question, as screenQuestion returned it, to the
// host and waits at most state_ttl for the answer.
func (g *Gateway) askHost(ctx context.Context, h host, x exposedTool, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	res, err := hostRound(ctx, g, x, "question", func(ctx context.Context) (*mcp.ElicitResult, error) {
		return h.ss.Elicit(ctx, p)
	})
	if err != nil {
		return nil, err
	}
	// Only the answer travels back: its action and content.
	return &mcp.ElicitResult{Action: res.Action, Content: res.Content}, nil
}

// hostRound sends the host one request of the server's (what it is, for
// the log) and waits at most state_ttl for the answer.
func hostRound[R any](ctx context.Context, g *Gateway, x exposedTool, what string, send func(context.Context) (R, error)) (R, error) {
	ctx, cancel := context.WithTimeout(ctx, g.stateTTL)
	defer cancel()
	g.log.Info("relaying the server's "+what+" to the host", "server", x.Server, "tool", x.Tool)
	return send(ctx)
}

// relay answers an upstream result: questions of a pass-through tool are
// relayed (in place, or as the gateway's own input_required), anything
// else is mapped to the host's result. rc counts the questions relayed for
// this call so far. A refused question ends the call with its reason, and
// the server's call is left as it is: an input_required is not continued,
// so the server gets no answer at all, and whatever a server answers after
// an elicitation/create it was refused is not shown.
func (g *Gateway) relay(ctx context.Context, cl *upstream.Client, h host, x exposedTool, args json.RawMessage,
	res *mcp.CallToolResult, err error, rc *relayCall) *mcp.CallToolResult {
	for errors.Is(err, upstream.ErrInputRequired) && rc.refused.Load() == nil {
		if !g.passThrough(x) {
			return toolError(api.ReasonUpstreamInputRequired, "The service asked for more input, which this gateway does not relay for this action.")
		}
		if int(rc.rounds.Add(1)) > g.maxRound {
			return toolError(api.ReasonTooManyRounds, "The service asked too many questions; the action was not completed.")
		}
		qs, qerr := g.relayable(x, res.InputRequests)
		if r, ok := errors.AsType[*relayRefusal](qerr); ok {
			g.logRefusal(x, r)
			return r.result(x.Server)
		}
		if qerr == nil && len(res.RequestState) > maxUpstreamState {
			qerr = fmt.Errorf("requestState of %d bytes", len(res.RequestState))
		}
		if qerr != nil {
			g.log.Warn("upstream question not relayed", "server", x.Server, "tool", x.Tool, "error", qerr.Error())
			return toolError(api.ReasonUpstreamInputRequired, "The service asked for input that cannot be shown in this app; the action was not completed.")
		}
		switch {
		case h.byResult:
			return g.relayInputRequired(ctx, h, x, args, res.RequestState, qs, rc.rounds.Load())
		case !h.inPlace():
			return toolError(api.ReasonElicitation, "The service asked a question this app cannot show; the action was not completed.")
		}
		answers := mcp.InputResponseMap{}
		for _, id := range slices.Sorted(maps.Keys(qs)) {
			a, aerr := g.askHost(ctx, h, x, qs[id])
			if aerr != nil {
				g.log.Warn("relayed question", "server", x.Server, "tool", x.Tool, "error", aerr.Error())
				return toolError(api.ReasonElicitation, "The service's question could not be shown to you; the action was not completed.")
			}
			answers[id] = a
		}
		res, _, err = cl.Call(ctx, upstream.ToolCall{Tool: x.Tool, Args: args, Answers: answers, State: res.RequestState, Relay: rc.up})
	}
	if r := rc.refused.Load(); r != nil {
		return r.result(x.Server)
	}
	switch {
	case timedOut(ctx) && errors.Is(err, upstream.ErrOutcomeUnknown):
		return toolError(api.ReasonUpstreamTimeout, fmt.Sprintf("The service did not answer within %v, so the gateway cancelled the call; the action may or may not have happened. It will not be retried automatically.",
			g.cfg.forwardTimeout(x.Server)))
	case errors.Is(err, upstream.ErrOutcomeUnknown):
		return toolError(api.ReasonUpstreamFailed, "The service did not answer; the action may or may not have happened. It will not be retried automatically.")
	case errors.Is(err, upstream.ErrUnavailable), errors.Is(err, upstream.ErrClosed):
		// The request never reached the server.
		return toolError(api.ReasonUpstreamFailed, "The service could not be reached, so nothing was sent to it."+nothingDone)
	case err != nil:
		return toolError(api.ReasonUpstreamFailed, "The service refused or could not take the call."+nothingDone)
	}
	return hostResult(res)
}

// relayState is a relayed question waiting for a 2026-07-28 host's
// answer: what the upstream needs to continue, and what the host's retry
// must match. The relay store (Gateway.relays) keeps its JSON, apart from
// the gated calls' continuations, so that a relay token can never
// continue a gated call; with the etcd state store, any replica continues
// it, once.
type relayState struct {
	Principal     string          `json:"principal"`
	Exposed       string          `json:"exposed"`
	ArgsDigest    string          `json:"args_digest"`
	Args          json.RawMessage `json:"args"`
	UpstreamState string          `json:"upstream_state"`
	IDs           []string        `json:"ids"`
	Rounds        int32           `json:"rounds"`
	Expiry        int64           `json:"expiry"` // unix nanoseconds
}

// relayInputRequired hands the upstream's questions to a 2026-07-28 host
// as the gateway's own input_required result, with a requestState the
// gateway seals: bound to the principal, the tool (marked as a relay) and
// the arguments, single use, expiring after state_ttl.
func (g *Gateway) relayInputRequired(ctx context.Context, h host, x exposedTool, args json.RawMessage, upstreamState string,
	qs map[string]*mcp.ElicitParams, rounds int32) *mcp.CallToolResult {
	name := x.Server + "." + x.Tool
	digest, err := canonical.DigestJSON(argsObject(args))
	if err != nil {
		return toolError(api.ReasonArgumentsInvalid, "The request's details could not be read exactly."+nothingDone)
	}
	nonce, err := newNonce()
	if err != nil {
		return toolError(api.ReasonBusy, "The service's question could not be passed on."+nothingDone)
	}
	expiry := g.now().Add(g.stateTTL)
	st := &relayState{Principal: h.principal, Exposed: name, ArgsDigest: digest, Args: args,
		UpstreamState: upstreamState, IDs: slices.Sorted(maps.Keys(qs)), Rounds: rounds, Expiry: expiry.UnixNano()}
	tok, err := g.codec.Seal(StateClaims{Principal: h.principal, Tool: relayToolPrefix + name, ArgsDigest: digest,
		QuestionIDs: st.IDs, Expiry: expiry.Unix(), Nonce: nonce})
	if err != nil {
		return toolError(api.ReasonBusy, "The service's question could not be passed on."+nothingDone)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return toolError(api.ReasonArgumentsInvalid, "The service's question could not be kept while you answer."+nothingDone)
	}
	// Held to the bounds of the gated calls' continuations, in a store of its own: the
	// principal's share, the whole store's, and a single entry's size.
	if err := g.relays.Put(ctx, waiting.Entry{Nonce: nonce, Principal: h.principal, Data: b, Expiry: expiry}, g.limits); err != nil {
		return g.storeRefusal(err)
	}
	irs := mcp.InputRequestMap{}
	for id, p := range qs {
		irs[id] = p
	}
	return &mcp.CallToolResult{InputRequests: irs, RequestState: relayPrefix + tok}
}

// argsObject is a call's arguments, {} when it has none.
func argsObject(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage(`{}`)
	}
	return args
}

// continueRelay takes a 2026-07-28 host's answers to a relayed question:
// the token is checked as a gated call's is (MAC, expiry, principal, tool,
// arguments, single use), the tool must still be pass-through under the
// policy in force, and the answers to the questions asked, decline and
// cancel as given, go back to the upstream with its own requestState.
func (g *Gateway) continueRelay(ctx context.Context, h host, name string) *mcp.CallToolResult {
	start := time.Now()
	req := h.req
	if h.principal == "" {
		return toolError(api.ReasonUnauthenticated, "This connection is not tied to a user."+nothingDone)
	}
	refused := func(code string, err error) *mcp.CallToolResult {
		return g.stateRefused("relay request state refused", name, code, err)
	}
	digest, err := canonical.DigestJSON(argsObject(req.Params.Arguments))
	if err != nil {
		return toolError(api.ReasonArgumentsInvalid, "The request's details could not be read exactly."+nothingDone)
	}
	b, err := g.takeState(ctx, g.relays, h.principal, relayToolPrefix+name, digest, strings.TrimPrefix(req.Params.RequestState, relayPrefix))
	if code, ok := stateReason(err); ok {
		return refused(code, err)
	} else if err != nil {
		return g.storeRefusal(err)
	}
	st, err := decodeRelay(b)
	if err != nil {
		return refused(ErrStateInvalid.Error(), err)
	}
	if st.Principal != h.principal || st.Exposed != name || st.ArgsDigest != digest {
		return refused(ErrStateMismatch.Error(), ErrStateMismatch)
	}
	x, ok := g.lookup(name)
	if !ok || !g.passThrough(x) {
		// Reclassified meanwhile: the gate's path starts from the beginning,
		// never from an upstream's half-answered call.
		res := toolError(api.ReasonUpstreamInputRequired, "This action now needs the safety check; please start it again."+nothingDone)
		g.count(policy.Irreversible, res, start)
		return res
	}
	answers := mcp.InputResponseMap{}
	for _, id := range st.IDs {
		a, _ := req.Params.InputResponses[id].(*mcp.ElicitResult)
		if a == nil {
			a = &mcp.ElicitResult{Action: "cancel"}
		}
		answers[id] = &mcp.ElicitResult{Action: a.Action, Content: a.Content}
	}
	rc := g.newRelayCall(ctx, h, x)
	rc.rounds.Store(st.Rounds)
	ctx, cancel := g.forwarding(ctx, x.Server)
	defer cancel()
	cl, err := g.catalog.Client(ctx, x.Server)
	if err != nil {
		return toolError(api.ReasonUpstreamFailed, "The service could not be reached."+nothingDone)
	}
	res, _, err := cl.Call(ctx, upstream.ToolCall{Tool: x.Tool, Args: st.Args, Answers: answers, State: st.UpstreamState, Relay: rc.up})
	out := g.relay(ctx, cl, h, x, st.Args, res, err, rc)
	g.count(g.policy().Tool(x.Server, x.Tool).EffectiveClass(), out, start)
	return out
}
