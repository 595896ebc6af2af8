package upstream

import (
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"

	"github.com/verdictgate/verdict/internal/plainhttp"
)

// Telling a call that never left from one whose answer was lost.
//
// A tools/call whose HTTP request failed may have run: the server may have
// read it and died before answering. But a request that never reached a
// connection cannot have run, and a caller that records outcomes (the
// executor) must not make an operator reconcile by hand a call the server
// never saw. What marks the boundary is the connection, not the error:
//
//   - net/http's Transport reports each attempt to get a connection to the
//     request's httptrace.ClientTrace (GetConn) and each connection it hands
//     the request (GotConn, after the dial and any TLS handshake). Only on a
//     connection it was handed can any byte of the request have been written.
//   - The Transport sends a POST again only when nothing of it was written
//     (a kept-alive connection found closed: nothingWrittenError), never
//     after a byte went out, since a POST is not idempotent — unless the
//     request carries an Idempotency-Key or X-Idempotency-Key header (a
//     server's configured headers could add one), which makes the Transport
//     take it as replayable and send it again after the server read it. A
//     request carrying either is never taken as unsent. So the attempts
//     before the last wrote nothing, and a request whose last attempt was
//     handed no connection (the dial was refused or failed, the call's time
//     ran out first) was never sent. Its error is then the dial's: a
//     *net.OpError with Op "dial".
//   - WroteRequest says nothing either way: it is called once the request is
//     in the connection's buffer, before the flush that may fail having
//     written nothing (the Transport's own reason to send again), and when
//     it reports an error some bytes may have gone.
//
// The rule holds only for the Transport, whose retries are known, and for a
// plainhttp.Transport over it, which asks for and is handed connections, and
// sends again, by the same rules and reports them to the same hooks; a
// request sent through another RoundTripper (Options.HTTPClient with a
// transport of the caller's own) is never taken as unsent. The gateway's own connections
// (package plainhttp) mark a request that failed before it reached one with
// plainhttp.ErrNotSent.

// sendTrace follows the one POST of a request: a tools/call, or a request
// passed through (see request.go), whose failure is classified alike. The
// request's trace (trace.go) holds it; a request whose trace holds none is
// never taken as unsent.
type sendTrace struct {
	mu         sync.Mutex
	requests   int  // POSTs of the call handed to the Transport under the trace
	asked      int  // connections asked for (GetConn)
	got        bool // the last one asked for was handed over (GotConn)
	replayable bool // a POST the Transport may send again once written (see replayable)
}

// attach returns req with the trace's hooks in its context, for the
// Transport to report to.
func (s *sendTrace) attach(req *http.Request) *http.Request {
	s.mu.Lock()
	s.requests++
	s.replayable = s.replayable || replayable(req.Header)
	s.mu.Unlock()
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn: func(string) {
			s.mu.Lock()
			s.asked++
			s.got = false
			s.mu.Unlock()
		},
		GotConn: func(httptrace.GotConnInfo) {
			s.mu.Lock()
			s.got = true
			s.mu.Unlock()
		},
	}))
}

// unsent reports whether the call's request certainly never reached a
// connection: one POST, sent by the Transport, whose last attempt was
// handed none. A second POST under one call (a redirect followed) may have
// followed a first that was written.
func (s *sendTrace) unsent() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests == 1 && !s.replayable && s.asked > 0 && !s.got
}

// replayable reports whether h makes a POST one net/http's Transport sends again after it was
// written (its isReplayable: an Idempotency-Key or X-Idempotency-Key header). The Transport
// looks the canonical names up; any spelling is taken here, which can only keep a request from
// being called unsent.
func replayable(h http.Header) bool {
	for name := range h {
		if strings.EqualFold(name, "Idempotency-Key") || strings.EqualFold(name, "X-Idempotency-Key") {
			return true
		}
	}
	return false
}

// neverSent reports whether the failed call err ended before its request
// reached the server, by the trace of its request or by the mark of the
// gateway's own connections.
func neverSent(err error, s *sendTrace) bool {
	return errors.Is(err, plainhttp.ErrNotSent) || s.unsent()
}
