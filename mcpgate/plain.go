package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/policy"
)

// Serving a pass-through call without the MCP library.
//
// The library's stateless HTTP handler decodes a request several times over
// (the message, its params, its _meta, the standard headers' name), each with
// a decoder that allocates a large buffer, and encodes the answer through its
// JSON-RPC layer: most of what a read call cost the gateway. servePlain
// answers the one request that makes up nearly all pass-through traffic, a
// 2026-07-28 host's tools/call of a read or reversible tool, itself: it
// decodes the body once, strictly, forwards the call over the gateway's
// upstream connection exactly as the library's handler would have had it
// forwarded (forward, relay and the metrics are the same code), and writes
// the answer the library would have written, byte for byte. The first round
// of such a host's call of a gated tool (no requestState, no inputResponses)
// is served too, through the same gate (call), with the request's other
// _meta members decoded as the library decodes them.
//
// It serves a request only when it knows what the library would do with it,
// and it decides that before anything is forwarded. Anything else — another
// method, a batch, a session, an older revision, a header or a member it
// does not know, a duplicate or case-mismatched member name, a _meta member
// of the protocol's own namespace it does not read, a progress token, a
// continuation, a tool not in the policy
// in force and the current listing, a pin that fails, a tool binding
// arguments to headers or requiring scopes, tracing on — goes to the
// library's handler as before, which accepts or refuses it as it always has.
// So the fast path never refuses a request (it passes it on) and never
// accepts one the library would refuse.

// plainRevision is the only revision served without the library: its
// requests stand alone, carry the host's revision and capabilities in
// _meta, and are asked questions with input_required results.
const plainRevision = "2026-07-28"

// plainCall is a tools/call as servePlain reads it. Unknown members are
// refused by the decoder: a request with any is left to the library.
type plainCall struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  string         `json:"method"`
	Params  *plainParams   `json:"params"`
}

type plainParams struct {
	Name      string         `json:"name"`
	Arguments jsontext.Value `json:"arguments,omitzero"`
	Meta      *plainMeta     `json:"_meta"`
}

// plainMeta is the _meta of a 2026-07-28 request (SEP-2575), with the types
// the library decodes each member into, so that whatever decodes here
// decodes there, and the request's other members (see UnmarshalJSONFrom).
type plainMeta struct {
	ProtocolVersion    string
	ClientInfo         *plainImpl
	ClientCapabilities *plainCaps
	// Other holds the other members, as the library holds them (a value
	// decoded into any: a number is a float64); nil when there are none.
	Other mcp.Meta
}

// UnmarshalJSONFrom decodes a _meta object: the revision's members strictly
// (with the decoder's options, which servePlain sets), and any other member
// the gate alone reads (plainOther) into Other. A member the library reads
// itself (the MCP namespace, progressToken) or the raw check's metaRefused
// is an error: the request is left to the library.
func (m *plainMeta) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return errors.New("_meta is not an object")
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		var dst any
		switch k := tok.String(); k {
		case mcp.MetaKeyProtocolVersion:
			dst = &m.ProtocolVersion
		case mcp.MetaKeyClientInfo:
			dst = &m.ClientInfo
		case mcp.MetaKeyClientCapabilities:
			dst = &m.ClientCapabilities
		default:
			if !plainOther(k) {
				return fmt.Errorf("_meta member %q is left to the library", k)
			}
			var v any
			if err := jsonv2.UnmarshalDecode(dec, &v); err != nil {
				return err
			}
			if m.Other == nil {
				m.Other = mcp.Meta{}
			}
			m.Other[k] = v
			continue
		}
		if err := jsonv2.UnmarshalDecode(dec, dst); err != nil {
			return err
		}
	}
	_, err = dec.ReadToken()
	return err
}

// plainOther reports whether a _meta member named k, other than the
// revision's own, may be served without the library: one the library does
// not read (nothing in the MCP namespace, such as the log level, and no
// progress token), and not the raw check's metaRefused, whose call the
// library's handler refuses (screened). Names are compared without case:
// one that differs only in case goes to the library too.
func plainOther(k string) bool {
	l := strings.ToLower(k)
	return !strings.HasPrefix(l, "io.modelcontextprotocol/") && l != strings.ToLower(progressTokenKey) && l != metaRefused
}

// progressTokenKey is the _meta member of a request's progress token.
const progressTokenKey = "progressToken"

type plainImpl struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitzero"`
	Description string `json:"description,omitzero"`
	Version     string `json:"version"`
	WebsiteURL  string `json:"websiteUrl,omitzero"`
}

type plainCaps struct {
	Experimental map[string]jsontext.Value `json:"experimental,omitzero"`
	Extensions   map[string]jsontext.Value `json:"extensions,omitzero"`
	Roots        *struct {
		ListChanged bool `json:"listChanged,omitzero"`
	} `json:"roots,omitzero"`
	Sampling *struct {
		Context *struct{} `json:"context,omitzero"`
		Tools   *struct{} `json:"tools,omitzero"`
	} `json:"sampling,omitzero"`
	Elicitation *struct {
		Form *struct{} `json:"form,omitzero"`
		URL  *struct{} `json:"url,omitzero"`
	} `json:"elicitation,omitzero"`
}

// plainCallOptions refuse unknown members (and, by default, case-mismatched
// and repeated member names and invalid UTF-8).
var plainCallOptions = jsonv2.RejectUnknownMembers(true)

// decodePlainCall reads body strictly: unknown, case-mismatched and repeated
// member names and invalid UTF-8 are errors. It returns nil for anything that
// is not one tools/call of a 2026-07-28 host as servePlain serves it.
func decodePlainCall(body []byte) *plainCall {
	var c plainCall
	if err := jsonv2.Unmarshal(body, &c, plainCallOptions); err != nil {
		return nil
	}
	p := c.Params
	switch {
	case c.JSONRPC != "2.0" || c.Method != methodCallTool || p == nil || p.Meta == nil:
		return nil
	case p.Meta.ProtocolVersion != plainRevision || p.Meta.ClientCapabilities == nil:
		return nil
	case p.Name == "" || !plainID(c.ID):
		return nil
	case len(p.Arguments) > 0 && p.Arguments.Kind() != '{':
		return nil
	}
	return &c
}

// plainID reports whether id is one the library writes back as it was sent:
// an integer of at most 15 digits written plainly, or a string of letters,
// digits and "-_.:" (nothing its encoder would escape).
func plainID(id jsontext.Value) bool {
	s := string(id)
	switch {
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		return strings.Trim(s[1:len(s)-1], idLetters) == ""
	case len(s) > 0:
		digits := strings.TrimPrefix(s, "-")
		return digits != "" && len(digits) <= 15 && (digits[0] != '0' || len(s) == 1) && strings.Trim(digits, "0123456789") == ""
	}
	return false
}

// idLetters are the bytes of a string id plainID allows.
const idLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"

// rpcID is id as the library holds it after decoding.
func rpcID(id jsontext.Value) (jsonrpc.ID, error) {
	if id.Kind() == '"' {
		return jsonrpc.MakeID(string(id[1 : len(id)-1]))
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, err
	}
	return jsonrpc.MakeID(float64(n))
}

// plainHeaders reports whether r's headers are those of a 2026-07-28 host's
// tools/call of name that the library's stateless handler accepts, with
// nothing else it reads: no session, no resumption, no argument headers.
func plainHeaders(r *http.Request, name string) bool {
	h := r.Header
	one := func(k, want string) bool { v := h.Values(k); return len(v) == 1 && v[0] == want }
	if !one("Mcp-Protocol-Version", plainRevision) || !one("Mcp-Method", methodCallTool) || !one("Mcp-Name", name) {
		return false
	}
	if ct := h.Values("Content-Type"); len(ct) != 1 || (ct[0] != "application/json" && baseMediaType(ct[0]) != "application/json") {
		return false
	}
	if jsonOK, streamOK := streamableAccepts(h.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	for k := range h {
		if k == "Mcp-Session-Id" || k == "Last-Event-Id" || strings.HasPrefix(k, "Mcp-Param-") {
			return false
		}
	}
	// The library refuses a request to a loopback listener that names another
	// host (DNS rebinding).
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopbackAddr(la) && !isLoopback(r.Host) {
		return false
	}
	return true
}

// loopbackAddr is isLoopback(a.String()), without the string for a TCP address.
func loopbackAddr(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok && ta != nil && ta.Zone == "" {
		return ta.IP.IsLoopback()
	}
	return isLoopback(a.String())
}

// streamableAccepts is the MCP library's reading of Accept.
func streamableAccepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for rest, more := value, true; more; {
			var raw string
			raw, rest, more = strings.Cut(rest, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

func baseMediaType(value string) string {
	mt, _, err := mime.ParseMediaType(value)
	if err != nil {
		return ""
	}
	return mt
}

// isLoopback is the MCP library's test of a loopback address or host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// plainTool reports whether the library would serve the tool's call with no
// header check of its own: def, its definition, decodes as one JSON value in
// which no object has a member named x-mcp-header, its name read as the
// library's decoder reads it (unescaped, in any case). A definition that does
// not decode strictly (a repeated name, invalid UTF-8, trailing bytes) is left
// to the library too. Deciding it costs a pass over the definition: exposeTools
// does it once per definition (exposedTool.headerFree).
func plainTool(def json.RawMessage) bool {
	if len(def) == 0 {
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(def))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if dec.StackDepth() == 0 {
			// The definition's value is read: nothing may follow it.
			_, err := dec.ReadToken()
			return err == io.EOF
		}
		if tok.Kind() != '"' {
			continue
		}
		// A string just read is an object member's name when its object now
		// holds an odd number of tokens (names and values alternate).
		if kind, n := dec.StackIndex(dec.StackDepth()); kind == '{' && n%2 == 1 && strings.EqualFold(tok.String(), headerAnnotation) {
			return false
		}
	}
}

// headerAnnotation is the member of an input schema's property that binds
// the argument to a header (SEP-2243).
const headerAnnotation = "x-mcp-header"

// servePlain serves r if it is a tools/call it can serve (a pass-through call
// or a gated call's first round; see above) and reports whether it did; when
// it reports false it has written nothing and forwarded nothing.
func (g *Gateway) servePlain(sf *surface, w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Method != http.MethodPost || g.tr.Enabled() {
		return false
	}
	start := time.Now()
	c := decodePlainCall(body)
	if c == nil || !plainHeaders(r, c.Params.Name) {
		return false
	}
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil || ti.UserID == "" {
		return false
	}
	name := sf.gateName(c.Params.Name)
	// As call does: the policy is read once, and the call runs under the class it has now.
	pol := g.policy()
	x, refused := g.callable(pol, name)
	if refused != nil || !x.headerFree {
		return false
	}
	if g.rs != nil && len(g.cfg.Tools[x.Server+"/"+x.Tool].Scopes) > 0 {
		return false
	}
	if _, err := rpcID(c.ID); err != nil {
		return false
	}
	meta := c.Params.Meta
	class := pol.Tool(x.Server, x.Tool).EffectiveClass()
	if (class == policy.Read || class == policy.Reversible) && len(meta.Other) > 0 {
		// What a pass-through call's other _meta members mean to the library is
		// the library's business.
		return false
	}
	// A pass-through call, or the first round of a gated call (a continuation carries
	// requestState or inputResponses, which the decoder refuses), as the library's handler
	// would have it: the same call, with the host asked by results, as a 2026-07-28 host is,
	// with the URL-mode elicitation its request declares.
	g.metrics.plainCalls.Inc()
	caps := meta.ClientCapabilities
	urlInput := caps.Elicitation != nil && caps.Elicitation.URL != nil
	h := host{principal: ti.UserID, byResult: true, urlInput: func() bool { return urlInput }}
	p := &mcp.CallToolParamsRaw{Meta: meta.Other, Name: c.Params.Name, Arguments: json.RawMessage(c.Params.Arguments)}
	// As httpTool does for the library.
	res, err := g.serve(withSubjectToken(r.Context(), g.rs != nil, ti), start, class, name, x, h, p)
	if err != nil {
		g.writePlainError(w, c.ID, err)
		return true
	}
	g.writePlain(w, c.ID, res)
	return true
}

// writePlainError writes err, a tool handler's error, as the library's
// stateless handler answers it to a 2026-07-28 host with JSON: a JSON-RPC
// error response, whose code and message the library's own conversion of an
// error makes.
func (g *Gateway) writePlainError(w http.ResponseWriter, id jsontext.Value, err error) {
	data, encErr := errorAnswer(id, err)
	if encErr != nil {
		g.log.Error("tool error not encoded", "error", encErr.Error())
		data, _ = errorAnswer(id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: encErr.Error()})
	}
	writePlainAnswer(w, data)
}

// errorAnswer is the library's JSON-RPC error response to id with err.
func errorAnswer(id jsontext.Value, err error) ([]byte, error) {
	rid, _ := rpcID(id)
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: rid, Error: err})
}

// errUnexpectedEncoding: the library's encoding of a result is not the shape
// withResultType builds on.
var errUnexpectedEncoding = errors.New("mcpgate: unexpected encoding of a tool result")

// writePlain writes res as the library's stateless handler answers a
// 2026-07-28 host with JSON: the result type set, content never null, the
// gateway's serverInfo in _meta, one JSON-RPC response. id is the request's
// id as sent, which plainID allows only in the form the library writes back.
func (g *Gateway) writePlain(w http.ResponseWriter, id jsontext.Value, res *mcp.CallToolResult) {
	out := *res
	asks := out.InputRequests != nil
	if out.Content == nil && !asks {
		out.Content = []mcp.Content{}
	}
	meta := make(mcp.Meta, len(out.Meta)+1)
	maps.Copy(meta, out.Meta)
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		meta[mcp.MetaKeyServerInfo] = gatewayImplementation()
	}
	out.Meta = meta
	b := answerBuffers.Get().(*answerBuffer)
	defer b.release()
	data, ok := b.commonAnswer(id, &out, asks)
	var err error
	if !ok {
		var result json.RawMessage
		if result, err = withResultType(&out, asks); err == nil {
			// The library's encoder writes {"jsonrpc","id","result"} without escaping HTML,
			// so the result, already compact, goes in as it is.
			data = make([]byte, 0, len(result)+len(id)+32)
			data = append(data, `{"jsonrpc":"2.0","id":`...)
			data = append(data, id...)
			data = append(data, `,"result":`...)
			data = append(data, result...)
			data = append(data, '}')
		}
	}
	if err != nil {
		g.log.Error("pass-through result not encoded", "error", err.Error())
		data, _ = errorAnswer(id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()})
	}
	writePlainAnswer(w, data)
}

// writePlainAnswer writes data, one JSON-RPC response, with the status and
// headers of the library's stateless handler's JSON answer.
func writePlainAnswer(w http.ResponseWriter, data []byte) {
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// answerBuffer is where writePlain encodes an answer of the common shape.
type answerBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// answerBuffers keeps answer buffers between calls.
var answerBuffers = sync.Pool{New: func() any {
	b := new(answerBuffer)
	b.enc = json.NewEncoder(&b.buf)
	return b
}}

// maxPooledAnswer is the largest buffer kept for another answer.
const maxPooledAnswer = 64 << 10

func (b *answerBuffer) release() {
	if b.buf.Cap() > maxPooledAnswer {
		return
	}
	b.buf.Reset()
	answerBuffers.Put(b)
}

// encode appends v as json.Marshal encodes it.
func (b *answerBuffer) encode(v any) error {
	if err := b.enc.Encode(v); err != nil {
		return err
	}
	b.buf.Truncate(b.buf.Len() - 1) // the newline Encode ends with
	return nil
}

// commonAnswer encodes the answer to id with res, a complete result of the
// common shape (text content without _meta or annotations, and any
// structured content, isError and _meta), as writePlain's other path does
// through the library's encoding and withResultType, without that path's
// copies: the library's encoding of a result is its members in the order of
// its fields (_meta, content, structuredContent, isError), each omitted when
// empty but content, each text content {"type":"text","text":...}, and every
// value as json.Marshal encodes it. The bytes are in b until its release.
// It reports false for any other result, and for a value that does not
// encode (the other path says why).
func (b *answerBuffer) commonAnswer(id jsontext.Value, res *mcp.CallToolResult, asks bool) ([]byte, bool) {
	if asks || res.RequestState != "" || res.Content == nil {
		return nil, false
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); !ok || t == nil || len(t.Meta) > 0 || t.Annotations != nil {
			return nil, false
		}
	}
	b.buf.Reset()
	b.buf.WriteString(`{"jsonrpc":"2.0","id":`)
	b.buf.Write(id)
	b.buf.WriteString(`,"result":{`)
	if len(res.Meta) > 0 {
		b.buf.WriteString(`"_meta":`)
		if err := b.encode(res.Meta); err != nil {
			return nil, false
		}
		b.buf.WriteByte(',')
	}
	b.buf.WriteString(`"content":[`)
	for i, c := range res.Content {
		if i > 0 {
			b.buf.WriteByte(',')
		}
		b.buf.WriteString(`{"type":"text","text":`)
		if err := b.encode(c.(*mcp.TextContent).Text); err != nil {
			return nil, false
		}
		b.buf.WriteByte('}')
	}
	b.buf.WriteByte(']')
	if res.StructuredContent != nil {
		b.buf.WriteString(`,"structuredContent":`)
		if err := b.encode(res.StructuredContent); err != nil {
			return nil, false
		}
	}
	if res.IsError {
		b.buf.WriteString(`,"isError":true`)
	}
	b.buf.WriteString(`,"resultType":"complete"}}`)
	return b.buf.Bytes(), true
}

// withResultType encodes res as the library does once it has set the result
// type (which only the library can set on a result): the result's members,
// then "resultType", then "inputRequests".
func withResultType(res *mcp.CallToolResult, asks bool) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	tail := []byte("}")
	rt := `"resultType":"complete"`
	if asks {
		ir, err := json.Marshal(res.InputRequests)
		if err != nil {
			return nil, err
		}
		tail = slices.Concat([]byte(`,"inputRequests":`), ir, []byte("}"))
		rt = `"resultType":"input_required"`
	}
	if !bytes.HasSuffix(b, tail) || len(b) < len(tail)+2 {
		return nil, errUnexpectedEncoding
	}
	head := b[:len(b)-len(tail)]
	out := make([]byte, 0, len(b)+len(rt)+1)
	out = append(out, head...)
	if len(head) > 1 {
		out = append(out, ',')
	}
	out = append(out, rt...)
	return append(out, tail...), nil
}
