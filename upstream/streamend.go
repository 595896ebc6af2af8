package upstream

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// Keeping the HTTP connection to a server across calls.
//
// The SDK hands a call its response as soon as the response's event is read from the POST's
// event stream, and drains and closes the stream afterwards, on its own goroutine. A call
// returns, and its context is cancelled, in that window more often than not; the transport then
// closes the connection instead of keeping it for the next call, and every call pays for a new
// TCP connection on both ends (measured with bench/gateload: four calls in ten). So a call
// through the SDK's client (request.go) waits, once it has its response, until the stream it
// came on has been drained and closed, before its context ends: a server that ends the stream
// after the response, as MCP says it should, holds the call for the few bytes of the stream's
// end. A server that keeps the stream open holds it until the call's context ends, and the
// result is returned then.

// streamEnd learns when the response body of the POST a call was sent with has been closed.
// The call's trace (trace.go) holds it.
type streamEnd struct {
	armed  atomic.Bool // a POST was sent under the call's context over HTTP
	once   sync.Once
	closed chan struct{}
}

func newStreamEnd() *streamEnd { return &streamEnd{closed: make(chan struct{})} }

// watch wraps body so that closing it ends the wait; a nil s leaves body as it is.
func (s *streamEnd) watch(body io.ReadCloser) io.ReadCloser {
	if s == nil {
		return body
	}
	s.armed.Store(true)
	return &endBody{ReadCloser: body, end: s}
}

// wait returns once the watched body is closed or ctx ends, at once if no body was watched
// (a stdio server, or no HTTP request made).
func (s *streamEnd) wait(ctx context.Context) {
	if !s.armed.Load() {
		return
	}
	select {
	case <-s.closed:
	case <-ctx.Done():
	}
}

type endBody struct {
	io.ReadCloser
	end *streamEnd
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.end.once.Do(func() { close(b.end.closed) })
	return err
}
