package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A plain tools/call over HTTP without the SDK's client.
//
// The SDK's client encodes a call through its JSON-RPC layer and decodes the
// answer message by message, allocating a large buffer for each; for a gateway
// that forwards every read call, that was about a third of its CPU per call.
// [Client.Call] of a ToolCall with the tool's Definition sends the same
// request itself and reads the answer with one pass, for the calls where
// what the SDK would send and do is known exactly (the choice is plainCall's,
// call.go):
//
//   - the server speaks 2026-07-28 or later without a session: every request
//     stands alone, carries its revision, client info and capabilities in
//     _meta (SEP-2575), and a server asks for input with an input_required
//     result, never with a request on the call's stream;
//   - the request is built from the SDK's own: the headers and the _meta of
//     the last tools/list the SDK sent on the current connection (so the
//     configured headers, the protocol version header and the client's
//     declared capabilities are the SDK's), with Mcp-Method and Mcp-Name set
//     as the SDK sets them;
//   - the tool binds no argument to an HTTP header (no x-mcp-header in its
//     definition, which the SDK would turn into Mcp-Param headers), its name
//     is a plain token, and the call carries no trace context to pass on;
//   - the call is no retry of an input_required answer and asks for no
//     result bytes.
//
// Any other call goes through the SDK. The answer is read as the SDK reads
// it — one JSON message or an event stream, whose notifications are skipped
// (tools/list_changed reported as the SDK reports it; the call's progress
// and log messages passed on as its Relay says, see relay.go) — and the
// result is decoded by the SDK's own type, so a caller gets what the SDK's
// path would return: the result, an input_required result with
// ErrInputRequired, or a failure of the same kind. A request the server sends
// on the call's stream has no place in these revisions; the call then ends
// with ErrOutcomeUnknown rather than leaving it unanswered.

// plainTemplate is what a plain call copies from the SDK's own requests.
type plainTemplate struct {
	header http.Header     // the SDK's headers, without those naming one request
	meta   json.RawMessage // params._meta: protocol version, client info, capabilities
	// calls holds, by tool name, the headers of a call of the tool: header
	// with Mcp-Method and Mcp-Name set. Every call of the tool is sent with
	// the same map, which nothing modifies: a RoundTripper must not modify
	// its request (the client's own adds its headers to a clone).
	calls sync.Map
}

// callHeader is the header of a plain call of tool.
func (t *plainTemplate) callHeader(tool string) http.Header {
	if h, ok := t.calls.Load(tool); ok {
		return h.(http.Header)
	}
	h := t.header.Clone()
	h.Set("Mcp-Method", methodCallTool)
	h.Set("Mcp-Name", tool)
	v, _ := t.calls.LoadOrStore(tool, h)
	return v.(http.Header)
}

// Headers the SDK sets per request, left out of the template.
var perRequestHeaders = []string{"Content-Length", "Mcp-Method", "Mcp-Name", "Last-Event-Id"}

// protocolVersionHeader is the header naming the revision of a request.
const protocolVersionHeader = "Mcp-Protocol-Version"

// plainRevision is the first revision whose requests stand alone.
const plainRevision = "2026-07-28"

// Keys of the _meta the SDK adds to every request of a 2026-07-28 session.
var sessionlessMeta = []string{
	"io.modelcontextprotocol/protocolVersion",
	"io.modelcontextprotocol/clientInfo",
	"io.modelcontextprotocol/clientCapabilities",
}

// newPlainTemplate derives a template from a tools/list request the SDK sent,
// or returns nil when calls on that connection must go through the SDK.
func newPlainTemplate(h http.Header, params json.RawMessage) *plainTemplate {
	if v := h.Get(protocolVersionHeader); v < plainRevision || h.Get("Mcp-Session-Id") != "" {
		return nil
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := jsonv2.Unmarshal(params, &p); err != nil {
		return nil
	}
	var pv string
	if err := jsonv2.Unmarshal(p.Meta[sessionlessMeta[0]], &pv); err != nil || pv != h.Get(protocolVersionHeader) {
		return nil
	}
	meta := map[string]json.RawMessage{}
	for _, k := range sessionlessMeta {
		if v, ok := p.Meta[k]; ok {
			meta[k] = v
		}
	}
	b, err := jsonv2.Marshal(meta, jsonv2.Deterministic(true))
	if err != nil {
		return nil
	}
	out := &plainTemplate{header: h.Clone(), meta: b}
	for _, k := range perRequestHeaders {
		out.header.Del(k)
	}
	maps.DeleteFunc(out.header, func(k string, _ []string) bool { return strings.HasPrefix(k, "Mcp-Param-") })
	return out
}

// plainTool reports whether a call of the tool named name, defined by def,
// can be made plainly: a name the SDK would put in Mcp-Name as it is, and a
// definition that binds no argument to a header. A definition that escapes
// any character might spell x-mcp-header in escapes, and is left to the SDK.
func plainTool(name string, def json.RawMessage) bool {
	if name == "" || len(def) == 0 || bytes.Contains(def, []byte("x-mcp-header")) || bytes.IndexByte(def, '\\') >= 0 {
		return false
	}
	return !strings.ContainsFunc(name, func(c rune) bool {
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/')
	})
}

// plainIDBase starts the ids of plain calls, apart from the SDK's own (which
// count up from 1) and within the integers every JSON reader keeps exactly.
const plainIDBase = 1 << 52

// callPlain makes the call of tool with args plainly, copying tmpl, for
// [Client.Call], which has decided that it can be made so (plainCall). A
// pass-through call is sent by plainConns, and a result of the common shape
// (text content, any structured content and _meta, isError, resultType
// "complete", nothing else) is decoded in one pass without the SDK's
// decoder, into values that encode as the SDK's do (a value encoding/json
// writes back as it was sent stays a json.RawMessage; see decodeCommon),
// and without the result type; any other result is decoded by the SDK's
// type. The progress and log messages on the call's own stream are passed
// on as rl says (relay.go).
func (c *Client) callPlain(ctx context.Context, tmpl *plainTemplate, tool string, args json.RawMessage, passThrough bool, rl *Relay) (*mcp.CallToolResult, error) {
	// The call's stream is its own: a log message on it needs no token.
	cr := c.track(rl, rl != nil && rl.Progress != nil)
	defer c.untrack(cr)
	fail := func(kind, err error) *CallError { return c.failed(methodCallTool, tool, kind, err) }
	id := plainIDBase + c.plainSeq.Add(1)
	body := bytes.NewBuffer(make([]byte, 0, 160+len(tmpl.meta)+len(tool)+len(args)))
	body.WriteString(`{"jsonrpc":"2.0","id":`)
	body.Write(strconv.AppendInt(body.AvailableBuffer(), id, 10))
	body.WriteString(`,"method":"tools/call","params":{"_meta":`)
	writeCallMeta(body, tmpl.meta, cr)
	body.WriteString(`,"name":"`)
	body.WriteString(tool) // a plain token: nothing to escape
	body.WriteString(`","arguments":`)
	if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 {
		body.WriteString("{}") // as the SDK sends a call without arguments
	} else if trimmed[0] != '{' || json.Compact(body, trimmed) != nil {
		return nil, fail(ErrRejected, errors.New("arguments must be a JSON object"))
	}
	body.WriteString(`}}`)
	ctx, cn, done, kind, cause := c.open(ctx)
	if kind != nil {
		return nil, fail(kind, cause)
	}
	defer done()
	sent := &sendTrace{}
	resp, err := c.sendPlain(ctx, methodCallTool, sent, tmpl.callHeader(tool), body.Bytes(), passThrough)
	if re, ok := errors.AsType[*requestError](err); ok {
		return nil, fail(ErrRejected, re.err)
	}
	if err != nil {
		kind := ErrOutcomeUnknown
		if neverSent(err, sent) {
			// No connection ever carried the request (sendtrace.go).
			kind = ErrUnavailable
		} else {
			c.cancelPlain(ctx, tmpl, id, passThrough)
		}
		return nil, c.plainFailed(ctx, cn, fail(kind, closedInFlight(ctx, err)))
	}
	res, kind, err := c.readPlain(ctx, resp, id, passThrough, cr)
	if kind != nil {
		if kind == ErrOutcomeUnknown {
			c.cancelPlain(ctx, tmpl, id, passThrough)
			return nil, c.plainFailed(ctx, cn, fail(kind, closedInFlight(ctx, err)))
		}
		return nil, fail(kind, err)
	}
	if res.NeedsInput() {
		return res, fail(ErrInputRequired, nil)
	}
	return res, nil
}

// cancelNotifyTimeout bounds the notifications/cancelled a plain call sends
// when its caller gives up on it, as the SDK's client bounds its own.
const cancelNotifyTimeout = 5 * time.Second

// cancelPlain tells the server, when the caller's context ended the plain
// call id after it was sent (its deadline passed, or its host went away),
// that the call is cancelled: notifications/cancelled naming it, as the
// SDK's client sends for its own calls, since a closed response is no
// cancellation to the server. It is best effort and does not hold up the
// caller; a client being closed sends nothing.
func (c *Client) cancelPlain(ctx context.Context, tmpl *plainTemplate, id int64, passThrough bool) {
	if ctx.Err() == nil || c.ctx.Err() != nil {
		return
	}
	reason, _ := json.Marshal(context.Cause(ctx).Error())
	body := make([]byte, 0, 128+len(tmpl.meta))
	body = append(body, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":`...)
	body = append(body, tmpl.meta...)
	body = append(body, `,"requestId":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"reason":`...)
	body = append(body, reason...)
	body = append(body, `}}`...)
	h := tmpl.header.Clone()
	h.Set("Mcp-Method", methodCancelled)
	go func() {
		nctx, cancel := context.WithTimeout(c.ctx, cancelNotifyTimeout)
		defer cancel()
		if resp, err := c.sendPlain(nctx, methodCancelled, nil, h, body, passThrough); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCapture))
			resp.Body.Close()
		}
	}()
}

// methodCancelled is the notification that cancels a request.
const methodCancelled = "notifications/cancelled"

// requestError: a request could not be made, or was refused before it was
// sent; the request fails with ErrRejected.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }

// sendPlain posts a plain call's body, a request of method, with header: a
// pass-through call over plainConns when the server allows it, else (or when
// the server redirects) through the client's http.Client. The executor's
// calls (not pass-through) always go through the http.Client: a call a verdict
// allowed is sent once by the transport the executor chose, never again on a
// redirect. A request sent through the http.Client carries
// a plain trace (trace.go), which the roundTripper passes on without reading
// its body, with sent, if not nil, to learn whether it reached a connection;
// one over plainConns is marked with plainhttp.ErrNotSent when it did not.
func (c *Client) sendPlain(ctx context.Context, method string, sent *sendTrace, header http.Header, body []byte, passThrough bool) (*http.Response, error) {
	if c.plainAddr != "" && passThrough {
		resp, err := c.plainConns.Do(ctx, plainhttp.Request{Method: http.MethodPost, URL: c.plainURL, Addr: c.plainAddr, Header: header, Body: body})
		if err != nil || !isRedirect(resp) {
			return resp, err
		}
		// Left to the http.Client, which sends the call again and follows it. The call
		// reached the server once already: whatever becomes of the second sending, it is
		// never taken for a call that never left.
		resp.Body.Close()
		sent = nil
	}
	ctx = withTrace(ctx, &requestTrace{method: method, plain: true, send: sent})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, &requestError{err}
	}
	req.Header = header
	return c.http.Do(req)
}

// plainFailed retires the connection after a transport failure, as request
// does, unless the caller's context ended first.
func (c *Client) plainFailed(ctx context.Context, cn *conn, err *CallError) error {
	if ctx.Err() == nil {
		c.retire(cn, err)
	}
	return err
}

// writeCallMeta writes the _meta of a plain call: what the call adds
// (callMeta) before the template's. The template's is an object the client
// encoded itself, so its first byte is '{'.
func writeCallMeta(body *bytes.Buffer, meta []byte, cr *callRelay) {
	level := mcp.LoggingLevel("")
	if cr.relay != nil {
		level = cr.relay.LogLevel
	}
	if cr.token == "" && level == "" {
		body.Write(meta)
		return
	}
	sep := byte('{')
	member := func(k, v string) {
		body.WriteByte(sep)
		b, _ := json.Marshal(k)
		body.Write(b)
		body.WriteByte(':')
		b, _ = json.Marshal(v)
		body.Write(b)
		sep = ','
	}
	if cr.token != "" {
		member(metaProgressToken, cr.token)
	}
	if level != "" {
		member(mcp.MetaKeyLogLevel, string(level))
	}
	if rest := bytes.TrimSpace(meta[1:]); len(rest) > 0 && rest[0] != '}' {
		body.WriteByte(',')
	}
	body.Write(meta[1:])
}

// readPlain reads the answer to the plain call id: its result, or the kind
// of failure (ErrRejected for the server's JSON-RPC error, ErrOutcomeUnknown
// for anything that is no answer). What the stream carries for the call
// before its answer goes to cr.
func (c *Client) readPlain(ctx context.Context, resp *http.Response, id int64, common bool, cr *callRelay) (*mcp.CallToolResult, error, error) {
	defer resp.Body.Close()
	mt := mediaType(resp.Header.Get("Content-Type"))
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return nil, ErrOutcomeUnknown, fmt.Errorf("HTTP status %d", code)
	case code < 200 || code >= 300:
		// As the SDK does: a JSON-RPC error in the body of any other failure
		// status is the server's refusal; without one nothing says what ran.
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxCapture))
		if m, derr := decodePlain(b); err == nil && derr == nil && m.Method == "" && m.Error != nil {
			return nil, rejection(m.Error), m.Error
		}
		return nil, ErrOutcomeUnknown, fmt.Errorf("HTTP status %d", code)
	}
	var m *plainMessage
	switch mt {
	case "application/json":
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, ErrOutcomeUnknown, err
		}
		if m, err = decodePlain(b); err != nil || !m.isResponse() || !m.isID(id) {
			return nil, ErrOutcomeUnknown, fmt.Errorf("not the call's response: %v", err)
		}
	case "text/event-stream":
		var err error
		if m, err = c.readEvents(resp.Body, id, cr); err != nil {
			return nil, ErrOutcomeUnknown, err
		}
		// The server ends the stream after the response; reading to its end
		// keeps the connection for the next call (see streamend.go).
		_, _ = io.Copy(io.Discard, resp.Body)
	default:
		return nil, ErrOutcomeUnknown, fmt.Errorf("unsupported content type %q", mt)
	}
	if m.Error != nil {
		return nil, rejection(m.Error), m.Error
	}
	if common {
		if res := decodeCommon(m.Result); res != nil {
			return res, nil, nil
		}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return nil, ErrOutcomeUnknown, fmt.Errorf("decoding the result: %w", err)
	}
	return &res, nil, nil
}

// mediaType is mime.ParseMediaType's media type of a Content-Type value, ""
// when it does not parse; the two a server answers a call with are known
// without parsing.
func mediaType(v string) string {
	switch v {
	case "text/event-stream", "application/json":
		return v
	}
	mt, _, _ := mime.ParseMediaType(v)
	return mt
}

// eventReaders keeps readEvents' buffered readers between calls.
var eventReaders = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

// readEvents reads an event stream up to the response to id. The call's
// progress and log messages go to cr (relay.go), other notifications are
// skipped, those the client follows reported (see notified); a request is
// an error.
func (c *Client) readEvents(body io.Reader, id int64, cr *callRelay) (*plainMessage, error) {
	r := eventReaders.Get().(*bufio.Reader)
	r.Reset(body)
	defer func() {
		r.Reset(nil)
		eventReaders.Put(r)
	}()
	var event eventData
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: read it whole (what ReadSlice returned is overwritten by the next read).
			head := bytes.Clone(line)
			rest, rerr := r.ReadBytes('\n')
			line, err = append(head, rest...), rerr
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("event stream ended before the response: %w", err)
		}
		data, ok := event.line(line)
		if !ok && err != nil {
			data, ok = event.end()
		}
		if ok {
			m, derr := decodePlain(data)
			switch {
			case derr != nil:
				return nil, fmt.Errorf("event stream: %w", derr)
			case m.isResponse():
				if m.isID(id) {
					return m, nil
				}
			case m.ID != nil:
				return nil, fmt.Errorf("the server sent a %q request on the call's stream", m.Method)
			case m.Method == notificationProgress:
				cr.progressRaw(m.Params)
			case m.Method == notificationMessage:
				cr.logRaw(m.Params)
			default:
				c.notified(m.Method, m.Params)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("event stream ended before the response: %w", io.ErrUnexpectedEOF)
		}
	}
}

// rejection is the kind of a call answered with e, as classify decides it:
// the SDK's own "rejected by transport" code is no answer from the server.
func rejection(e *jsonrpc.Error) error {
	if e.Code == codeRejectedByTransport {
		return ErrOutcomeUnknown
	}
	return ErrRejected
}

// Notifications a client follows.
const (
	notificationToolListChanged     = "notifications/tools/list_changed"
	notificationResourceListChanged = "notifications/resources/list_changed"
	notificationPromptListChanged   = "notifications/prompts/list_changed"
	notificationResourceUpdated     = "notifications/resources/updated"
)

// notified reports a notification read on a plain call's stream to the
// hook the SDK's handlers report it to when it comes their way.
func (c *Client) notified(method string, params json.RawMessage) {
	var hook func()
	switch method {
	case notificationToolListChanged:
		hook = c.opts.ToolListChanged
	case notificationResourceListChanged:
		hook = c.opts.ResourceListChanged
	case notificationPromptListChanged:
		hook = c.opts.PromptListChanged
	case notificationResourceUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) == nil && p.URI != "" {
			c.updated(p.URI)
		}
	}
	if hook != nil {
		hook()
	}
}

// plainMessage is one JSON-RPC message as a plain call reads it.
type plainMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      jsontext.Value  `json:"id,omitzero"`
	Method  string          `json:"method,omitzero"`
	Result  jsontext.Value  `json:"result,omitzero"`
	Error   *jsonrpc.Error  `json:"error,omitzero"`
	Params  json.RawMessage `json:"params,omitzero"`
}

func (m *plainMessage) isResponse() bool {
	return m.Method == "" && (m.Result != nil || m.Error != nil)
}

func (m *plainMessage) isID(id int64) bool {
	n, err := strconv.ParseInt(string(m.ID), 10, 64)
	return err == nil && n == id
}

// decodePlain reads one message as the SDK would: unknown members ignored and,
// as its decoder does, the last of two members of one name kept.
func decodePlain(b []byte) (*plainMessage, error) {
	var m plainMessage
	if err := jsonv2.Unmarshal(b, &m, jsontext.AllowDuplicateNames(true)); err != nil {
		return nil, err
	}
	if m.JSONRPC != "2.0" {
		return nil, errors.New(`not JSON-RPC 2.0`)
	}
	return &m, nil
}

// plainState holds the current connection's template; see Client.plain.
type plainState = atomic.Pointer[plainTemplate]

// commonResult is the shape of nearly every tool result; decodeCommon reads
// nothing else.
type commonResult struct {
	Content           []commonContent           `json:"content"`
	StructuredContent jsontext.Value            `json:"structuredContent,omitzero"`
	IsError           bool                      `json:"isError,omitzero"`
	Meta              map[string]jsontext.Value `json:"_meta,omitzero"`
	ResultType        string                    `json:"resultType,omitzero"`
}

type commonContent struct {
	Type string  `json:"type"`
	Text *string `json:"text"` // null or absent is not the common shape
}

// decodeCommon decodes a result of the common shape into values that encode
// as the SDK's decoding does (text content, structured content and _meta as
// map[string]any, []any, float64, string, bool and nil), or returns nil for
// anything else: an unknown member, a repeated name, invalid UTF-8, a number
// a float64 cannot hold, content that is not text, no content, a result type
// other than "complete". A string stays a string; any other value that
// encoding/json would write back exactly as it was sent (see v1Exact) stays
// as it was sent, a json.RawMessage, which is how encoding/json writes it.
func decodeCommon(b []byte) *mcp.CallToolResult {
	var r commonResult
	if err := jsonv2.Unmarshal(b, &r, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil
	}
	if len(r.Content) == 0 || (r.ResultType != "" && r.ResultType != "complete") {
		return nil
	}
	res := &mcp.CallToolResult{IsError: r.IsError, Content: make([]mcp.Content, len(r.Content))}
	for i, c := range r.Content {
		if c.Type != "text" || c.Text == nil {
			return nil
		}
		res.Content[i] = &mcp.TextContent{Text: *c.Text}
	}
	if len(r.StructuredContent) > 0 && r.StructuredContent.Kind() != 'n' {
		v, ok := commonValue(r.StructuredContent)
		if !ok {
			return nil
		}
		res.StructuredContent = v
	}
	if len(r.Meta) > 0 {
		res.Meta = make(mcp.Meta, len(r.Meta))
		for k, raw := range r.Meta {
			v, ok := commonValue(raw)
			if !ok {
				return nil
			}
			res.Meta[k] = v
		}
	}
	return res
}

// commonValue is one value of a result as decodeCommon holds it.
func commonValue(raw jsontext.Value) (any, bool) {
	if raw.Kind() != '"' && v1Exact(raw) {
		return json.RawMessage(raw), true
	}
	var v any
	if err := jsonv2.Unmarshal(raw, &v); err != nil {
		return nil, false
	}
	return v, true
}

// v1Reader is a reusable decoder for v1Exact.
type v1Reader struct {
	buf     bytes.Buffer
	dec     jsontext.Decoder
	data    []byte
	prevEnd int // where the last token read ends
}

var v1Readers = sync.Pool{New: func() any { return new(v1Reader) }}

// v1Exact reports whether encoding/json encodes the value the SDK's decoder
// makes of data (maps, slices, float64, string, bool, nil) as data itself:
// compact, each object's names in increasing order without a repeat, every
// name and string without an escape and without a character encoding/json
// escapes (control characters, <, >, &, U+2028, U+2029), in valid UTF-8, and
// every number as encoding/json writes a float64.
func v1Exact(data []byte) bool {
	r := v1Readers.Get().(*v1Reader)
	r.buf = *bytes.NewBuffer(data)
	r.dec.Reset(&r.buf)
	r.data, r.prevEnd = data, 0
	ok := r.value() && r.prevEnd == len(data)
	if ok {
		_, err := r.dec.ReadToken()
		ok = err == io.EOF
	}
	r.buf, r.data = bytes.Buffer{}, nil
	r.dec.Reset(&r.buf)
	v1Readers.Put(r)
	return ok
}

func (r *v1Reader) value() bool {
	switch r.dec.PeekKind() {
	case jsontext.KindBeginObject:
		if !r.token() {
			return false
		}
		var last []byte
		for i := 0; r.dec.PeekKind() != jsontext.KindEndObject; i++ {
			name, ok := r.scalar()
			if !ok || !v1String(name) {
				return false
			}
			name = name[1 : len(name)-1]
			if i > 0 && bytes.Compare(last, name) >= 0 {
				return false
			}
			last = name
			if !r.value() {
				return false
			}
		}
		return r.token()
	case jsontext.KindBeginArray:
		if !r.token() {
			return false
		}
		for r.dec.PeekKind() != jsontext.KindEndArray {
			if !r.value() {
				return false
			}
		}
		return r.token()
	case jsontext.KindString:
		s, ok := r.scalar()
		return ok && v1String(s)
	case jsontext.KindNumber:
		n, ok := r.scalar()
		return ok && v1Number(n)
	case jsontext.KindNull, jsontext.KindTrue, jsontext.KindFalse:
		_, ok := r.scalar()
		return ok
	}
	return false
}

// token reads a delimiter, and scalar a name or a scalar value, as it is
// in data; each fails unless it follows the previous token directly or
// after one comma or colon.
func (r *v1Reader) token() bool {
	if _, err := r.dec.ReadToken(); err != nil {
		return false
	}
	return r.adjacent(1)
}

func (r *v1Reader) scalar() ([]byte, bool) {
	v, err := r.dec.ReadValue()
	if err != nil || !r.adjacent(len(v)) {
		return nil, false
	}
	return r.data[r.prevEnd-len(v) : r.prevEnd], true
}

func (r *v1Reader) adjacent(n int) bool {
	end := int(r.dec.InputOffset())
	start := end - n
	switch gap := start - r.prevEnd; {
	case gap == 1 && (r.data[r.prevEnd] == ',' || r.data[r.prevEnd] == ':'):
	case gap != 0:
		return false
	}
	r.prevEnd = end
	return true
}

// v1String reports whether the string s (quotes included, valid UTF-8) is
// as encoding/json writes its content.
func v1String(s []byte) bool {
	for i := 1; i < len(s)-1; i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '\\' || c == '<' || c == '>' || c == '&':
			return false
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9): // U+2028, U+2029
			return false
		}
	}
	return true
}

// v1Number reports whether the number n is as encoding/json writes the
// float64 it denotes.
func v1Number(n []byte) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return false
	}
	var buf [32]byte
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if k := len(b); k >= 4 && b[k-4] == 'e' && b[k-3] == '-' && b[k-2] == '0' {
			b[k-2] = b[k-1]
			b = b[:k-1]
		}
	}
	return bytes.Equal(b, n)
}

// isRedirect reports whether resp is a redirect http.Client would follow.
func isRedirect(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}
