package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK decodes a listed tool's inputSchema into map[string]any, which
// rounds numbers through float64 (9007199254740993 becomes ...992),
// collapses duplicate keys and repairs invalid UTF-8 before anyone can
// see it. A digest over that would certify a schema the server never
// sent. So the client watches the wire below the SDK and keeps the raw
// "result" of every listing's response (tools/list, and resources/list,
// resources/templates/list and prompts/list, whose items are passed on as
// listed): on stdio by wrapping the connection, on HTTP in the
// RoundTripper (wrapping the HTTP connection would hide interfaces the
// SDK's streamable client relies on). The same two places capture the
// result of a request made with a slot of its own: a tools/call asking
// for its result's bytes (ToolCall.Raw), and every request passed through
// for the gateway (resources/read, prompts/get, completion/complete); see
// rawcall.go.

const methodListTools = "tools/list"

// The SDK keeps the listing results of a 2026-07-28 session, and its
// resources/read results, for as long as the server's ttlMs says
// (SEP-2549) and answers ListTools (ListResources, ReadResource, ...)
// from that cache without asking the server. Such an answer has no bytes
// to capture, so every listing in the window would fail closed, and a
// server allowed to be cached longer than CatalogOptions.MaxAge would
// drop out of the catalog while healthy. The SDK has no option, request
// parameter or meta that skips the cache, so [uncachedListings] zeroes
// the ttl of every such result before the SDK stores it: the SDK treats
// a stored result without a ttl as stale, and each listing or read is a
// request the server answers on the current connection. A cached result
// is never reused, so a ttl can neither serve a definition seen on
// another connection nor keep one beyond what the server said; the ttl
// reaches the caller as the server sent it in the captured bytes.

// maxCapture bounds the bytes buffered from one listing's HTTP response.
// A larger listing cannot be captured, and listing fails closed.
const maxCapture = 16 << 20

// uncachedListings is a sending middleware that zeroes the ttl of every
// result the SDK caches before it does; see above. The stale entry
// stays in the SDK's cache until the next listing, so the SDK still
// finds the listed definitions when it builds a call (the streamable
// transport's Mcp-Param headers), as for a server that sets no ttl. Were
// a later SDK to answer from its cache regardless, nothing would be
// captured and the listing would fail closed.
func uncachedListings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			r.TTLMs = 0
		case *mcp.ListResourcesResult:
			r.TTLMs = 0
		case *mcp.ListResourceTemplatesResult:
			r.TTLMs = 0
		case *mcp.ListPromptsResult:
			r.TTLMs = 0
		case *mcp.ReadResourceResult:
			r.TTLMs = 0
		}
		return res, err
	}
}

// listCapture collects the raw results of listings (see isListing) by
// request id. Listing is serialized per client, so after a reset at most
// one request is pending.
//
// Ids are map keys as they are: an id holds a string or an int64, and two
// ids are equal only when both type and value are (1 and "1" differ).
type listCapture struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	results map[jsonrpc.ID]json.RawMessage
}

// isListing reports whether method is one of the listings the client takes.
func isListing(method string) bool {
	switch method {
	case methodListTools, methodListResources, methodListResourceTemplates, methodListPrompts:
		return true
	}
	return false
}

// listingMark is in the body of every listing's request, which is decoded
// only when it holds it.
const listingMark = "/list"

func newListCapture() *listCapture {
	return &listCapture{pending: map[jsonrpc.ID]bool{}, results: map[jsonrpc.ID]json.RawMessage{}}
}

// reset forgets everything, including late answers to abandoned requests.
func (c *listCapture) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.pending)
	clear(c.results)
}

func (c *listCapture) sent(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || !isListing(req.Method) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[req.ID] = true
}

func (c *listCapture) received(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	// A response with neither a result nor an error is no JSON-RPC response: it is no result
	// either, and take says none was captured rather than hand back empty bytes.
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return
	}
	k := resp.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[k] {
		delete(c.pending, k)
		c.results[k] = bytes.Clone(resp.Result)
	}
}

// take returns the single captured result since the last reset.
func (c *listCapture) take() (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.results) != 1 {
		return nil, fmt.Errorf("raw listing result not captured (%d candidates)", len(c.results))
	}
	for _, r := range c.results {
		return r, nil
	}
	panic("unreachable")
}

// captureTransport wraps a stdio transport's connection. The stdio
// connection implements no optional SDK interfaces, so wrapping it loses
// nothing.
type captureTransport struct {
	mcp.Transport
	capture *listCapture
	calls   *callRegistry
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return captureConn{conn, t.capture, &callTable{}, t.calls}, nil
}

// captureConn captures the listings' results of the client and the
// result of every request made with a slot (see rawcall.go), and hands the
// progress naming a call's token to the call (relay.go). Its call table is
// its own: a response read on this connection fills only a slot filed by a
// request written on it.
type captureConn struct {
	mcp.Connection
	capture *listCapture
	calls   *callTable
	relays  *callRegistry
}

func (c captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.capture.received(msg)
		c.calls.received(msg)
		if c.relays != nil {
			c.relays.received(msg)
		}
	}
	return msg, err
}

func (c captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.capture.sent(msg)
	c.calls.sent(ctx, msg)
	return c.Connection.Write(ctx, msg)
}

// roundTripper adds the configured headers to every request and captures
// the listings' responses, and the response to a request whose trace
// (trace.go) holds a slot (see rawcall.go). The POST of a request made
// through the SDK's client or plainly is traced to its connection when base
// is net/http's Transport (see sendtrace.go).
type roundTripper struct {
	base    http.RoundTripper
	headers http.Header
	capture *listCapture
	plain   *plainState // the template of plain calls, from the SDK's tools/list requests
	// calls are the client's calls in flight: a call sent with a progress
	// token of the client's own gets the progress and log messages of its
	// response stream (relay.go).
	calls  *callRegistry
	traced bool // base is an *http.Transport
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for name, vs := range t.headers {
			req.Header[name] = vs
		}
	}
	tr := traceOf(req.Context())
	if !t.traced {
		tr.send = nil
	}
	if tr.plain {
		// A plain call's own request: it reads its answer itself.
		if tr.send != nil {
			req = tr.send.attach(req)
		}
		return t.base.RoundTrip(req)
	}
	var into, notes receiver
	switch {
	case req.Method == http.MethodPost && req.GetBody != nil:
		req, into, notes = t.posted(req, tr)
	case req.Method == http.MethodGet && tr.slot != nil:
		// The SDK resumes a call's interrupted SSE stream with a GET
		// made under the call's context; the response may come on it.
		if _, ok := tr.slot.boundID(); ok {
			into = tr.slot
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if req.Method == http.MethodPost {
		resp.Body = tr.end.watch(resp.Body)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	sse := mt == "text/event-stream"
	switch {
	case notes != nil && !sse:
		// One JSON message: the response, nothing to pass on.
	case notes != nil && into != nil:
		into = receivers{into, notes}
	case notes != nil:
		into = notes
	}
	if into == nil {
		return resp, nil
	}
	resp.Body = &captureBody{ReadCloser: resp.Body, sse: sse, into: into}
	return resp, nil
}

// posted reads the body of a POST to say who takes what comes on its response: into, the
// listing capture for a listing request, or the slot of the request tr follows; notes, the
// relay of a call sent with a progress token of the client's own. The request returned is
// req, traced to its connection when it is the one tr follows.
func (t *roundTripper) posted(req *http.Request, tr requestTrace) (_ *http.Request, into, notes receiver) {
	body, err := req.GetBody()
	if err != nil {
		return req, nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(body, maxCapture))
	body.Close()
	if err != nil {
		return req, nil, nil
	}
	if bytes.Contains(b, []byte(listingMark)) {
		if r := callOf(b); r != nil && isListing(r.Method) {
			t.capture.sent(r)
			into = t.capture
			if t.plain != nil && r.Method == methodListTools {
				t.plain.Store(newPlainTemplate(req.Header, r.Params))
			}
		}
	}
	if t.calls != nil && t.calls.tokens.Load() > 0 && bytes.Contains(b, []byte(metaProgressToken)) {
		// The token is the client's own, sent in this call alone: what
		// comes on this response is the call's.
		if tok := progressTokenOf(b); tok != "" {
			if cr := t.calls.byProgressToken(tok); cr != nil {
				notes = cr
			}
		}
	}
	if (tr.slot != nil || tr.send != nil) && tr.method != "" && bytes.Contains(b, []byte(tr.method)) {
		if r := callOf(b); r != nil && r.Method == tr.method {
			if tr.send != nil {
				req = tr.send.attach(req)
			}
			if tr.slot != nil && tr.slot.bind(r.ID) {
				into = tr.slot
			}
		}
	}
	return req, into, notes
}

// callOf is the JSON-RPC call b holds, nil when it holds another message or none.
func callOf(b []byte) *jsonrpc.Request {
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		return r
	}
	return nil
}

// receiver takes the messages decoded from a captured HTTP body: a
// *listCapture, the *rawSlot of one request, the *callRelay of a call
// whose log messages are passed on, or two of them (receivers).
type receiver interface{ received(jsonrpc.Message) }

// receivers hands each message to both.
type receivers [2]receiver

func (r receivers) received(msg jsonrpc.Message) {
	r[0].received(msg)
	r[1].received(msg)
}

// captureBody passes a response body through while decoding the JSON-RPC
// messages in it. It decodes each message before handing its last bytes
// to the reader, so a captured result is in place before the SDK can
// deliver the same response to the caller.
type captureBody struct {
	io.ReadCloser
	sse   bool
	into  receiver
	buf   []byte
	event eventData
	done  bool // gave up (too large) or finished
}

func (b *captureBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	b.buf = append(b.buf, p[:n]...)
	if len(b.buf) > maxCapture {
		b.done, b.buf = true, nil
		return n, err
	}
	if b.sse {
		b.events(err != nil)
	} else if err != nil {
		b.deliver(b.buf)
		b.done, b.buf = true, nil
	}
	return n, err
}

// events decodes every server-sent event the buffer's complete lines end; at the end of the
// stream, the last line ends the last event (eventData).
func (b *captureBody) events(eof bool) {
	for {
		i := bytes.IndexByte(b.buf, '\n')
		if i < 0 {
			break
		}
		if data, ok := b.event.line(b.buf[:i]); ok {
			b.deliver(data)
		}
		b.buf = b.buf[i+1:]
	}
	if eof {
		if data, ok := b.event.line(b.buf); ok {
			b.deliver(data)
		}
		if data, ok := b.event.end(); ok {
			b.deliver(data)
		}
		b.done, b.buf = true, nil
	}
}

func (b *captureBody) deliver(data []byte) {
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		b.into.received(msg)
	}
}
