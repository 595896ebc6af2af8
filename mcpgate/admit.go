package mcpgate

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/waiting"
)

// storeReasons are the reason codes of calls refused for the waiting continuations' bounds,
// the rate limit, or the store: the texts of waiting's errors.
func storeReasons() []string {
	return []string{waiting.ErrBusy.Error(), waiting.ErrBusyPrincipal.Error(), waiting.ErrStateTooLarge.Error(),
		waiting.ErrStateUnavailable.Error(), api.ReasonRateLimited}
}

// storeReason is the reason code of a store error; one the store did not classify is
// state_unavailable (the store could not give a definite answer).
func storeReason(err error) string {
	for _, e := range []error{waiting.ErrBusy, waiting.ErrBusyPrincipal, waiting.ErrStateTooLarge} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return waiting.ErrStateUnavailable.Error()
}

// admitCall decides, before verdictd is asked, whether a first-round gated call may start:
// the principal's rate of first-round calls (its bucket in the state section's store, shared by
// the replicas with etcd), and whether the principal has room for one more
// call waiting for its user: for a host asked through input_required, room in the state store
// (checked again, exactly, when the continuation is put); for a host asked in place, a place
// among the calls held in memory while their user answers, taken now and given back by
// release when the call ends. A flood is refused here, so it writes no ask_user record at
// verdictd per call. A nil result admits the call.
func (g *Gateway) admitCall(ctx context.Context, h host, st *callState) (release func(), res *mcp.CallToolResult) {
	switch err := g.limiter.Allow(ctx, h.principal); {
	case errors.Is(err, waiting.ErrRateLimited):
		g.metrics.storeRefused.WithLabelValues(api.ReasonRateLimited).Inc()
		return nil, toolError(api.ReasonRateLimited, "Too many actions were started in a short time; please wait a minute and try again."+nothingDone)
	case err != nil:
		// A bucket in etcd that cannot be read refuses the call: never a call unlimited.
		return nil, g.storeRefusal(err)
	}
	if !h.byResult {
		b, err := encodeState(st)
		if err != nil {
			return nil, toolError(api.ReasonArgumentsInvalid, "The request's details could not be kept while you answer."+nothingDone)
		}
		release, err := g.held.hold(h.principal, len(b), g.limits)
		if err != nil {
			return nil, g.storeRefusal(err)
		}
		return release, nil
	}
	u, err := g.store.Principal(ctx, h.principal)
	if err != nil {
		return nil, g.storeRefusal(err)
	}
	if u.Count >= g.limits.PrincipalPending || u.Bytes >= g.limits.PrincipalBytes {
		return nil, g.storeRefusal(waiting.ErrBusyPrincipal)
	}
	return func() {}, nil
}

// storeRefusal is the tool error for a continuation the store refused, counted by reason.
func (g *Gateway) storeRefusal(err error, meta ...any) *mcp.CallToolResult {
	reason := storeReason(err)
	g.metrics.storeRefused.WithLabelValues(reason).Inc()
	var text string
	switch reason {
	case waiting.ErrBusyPrincipal.Error():
		text = "You have too many requests waiting for answers; answer or abandon one of them, or try again shortly."
	case waiting.ErrStateTooLarge.Error():
		text = "This request carries too much conversation to be kept while you answer; start it again with less."
	case waiting.ErrBusy.Error():
		text = "Too many requests are waiting for answers; please try again shortly."
	default:
		g.log.Error("state store", "error", err.Error())
		text = "The request could not be kept while you answer: its store is not available right now."
	}
	return toolError(reason, text+nothingDone, meta...)
}
