package upstream

import "context"

// What one request carries down to the transports.
//
// A request made through the SDK's client passes through the SDK's
// ClientSession before it reaches the transports below it (the
// roundTripper of capture.go over HTTP, the wrapped stdio connection and
// its callTable of rawcall.go), and the SDK hands them nothing of the
// request but its context. So what the transports must learn of a request,
// and report back about it, rides in the context: one value, the request's
// *requestTrace, looked up by traceOf alone. As with net/http/httptrace's
// ClientTrace, the trace is fixed when made: its fields are set once, by
// the function that sends the request (request in request.go, sendPlain in
// passcall.go), and never assigned again. What the transports report goes
// to the objects it points to, which belong to that function's frame and
// each keep their own lock: the slot the result's bytes are bound to and
// filled in (bind, received), the send trace the Transport's connection
// hooks count on (GetConn, GotConn), the watch on the end of the POST's
// response stream. Nothing else in the package reads a context value. Being
// one value, a request's trace hides whole any trace of the context it is
// made under: no part of another request's trace reaches its transports.
//
// A request whose trace is lost (a context made afresh somewhere below the
// caller) is one whose trace is zero, and each part of it fails toward
// what the caller can trust:
//
//   - no slot: its result's bytes are never bound, and the caller gets nil
//     bytes (which it is told to expect), never another request's;
//   - no send trace: nothing counts its POSTs, and its failure is never
//     taken as "never sent": it is ErrOutcomeUnknown, not ErrUnavailable;
//   - no stream end: the request does not wait for its response stream to
//     end, and its connection may be closed rather than kept.
//
// trace_test.go holds each of them.
//
// A plain call's request does not pass through the SDK: its trace goes
// from sendPlain to the roundTripper in the http.Request it is made with.

// requestTrace is what one request tells the transports about itself. Its
// fields are set when it is made and never changed; a nil pointer among
// them is a part not asked for.
type requestTrace struct {
	method string     // the request's MCP method: only a request of it is followed
	plain  bool       // a plain call's own request, which reads its answer itself (passcall.go)
	slot   *rawSlot   // receives the result's bytes (rawcall.go)
	send   *sendTrace // learns whether the request reached a connection (sendtrace.go)
	end    *streamEnd // learns when the POST's response body is closed (streamend.go)
}

type traceKey struct{}

// withTrace returns ctx carrying t, the trace of the request made under it.
func withTrace(ctx context.Context, t *requestTrace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceOf returns the trace of the request made under ctx, the zero trace
// if there is none.
func traceOf(ctx context.Context) requestTrace {
	if t, ok := ctx.Value(traceKey{}).(*requestTrace); ok {
		return *t
	}
	return requestTrace{}
}
