package mcpgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/verdictgate/verdict/api"
)

// Protocol revisions the HTTP endpoint tells apart.
const (
	// revisionStateless is the first revision served without sessions:
	// its clients are asked through input_required results.
	revisionStateless = "2026-07-28"
)

// peekLimit bounds what the router reads of a request body to find an
// initialize. The SDK's own limit (4 MiB) applies to the whole body
// afterwards; an initialize is a few hundred bytes.
const peekLimit = 64 << 10

// httpMCP routes each request on /mcp to one of two SDK handlers.
//
// A client of a revision before 2026-07-28 can answer the gate's
// questions only through elicitation/create, a request the server sends
// while the tools/call is open; the SDK carries it on that call's stream
// only in a session it keeps, and only a session remembers the
// capabilities the client declared in initialize. Such clients get a
// session: their initialize goes to the stateful handler, which answers
// with an Mcp-Session-Id, and every later request naming a session goes
// there too. Everything else — 2026-07-28 clients, which the SDK serves
// only statelessly, and requests of older clients that name no session —
// goes to the stateless handler, as before sessions existed.
type httpMCP struct {
	stateless http.Handler
	stateful  http.Handler
	sessions  *sessionLimit
}

func (h *httpMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Mcp-Session-Id") != "" {
		h.stateful.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.stateless.ServeHTTP(w, r)
		return
	}
	peek, err := io.ReadAll(io.LimitReader(r.Body, peekLimit))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(peek), r.Body), r.Body}
	id, version, ok := legacyInitialize(peek)
	if !ok {
		h.stateless.ServeHTTP(w, r)
		return
	}
	release, ok := h.sessions.reserve()
	if !ok {
		h.sessions.refuse(w, id, version)
		return
	}
	defer release()
	h.stateful.ServeHTTP(w, r)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// legacyInitialize reports whether body is one initialize request
// offering a revision before 2026-07-28, with its id and that revision.
// A batch, or anything that does not parse, is not: it is left to the
// stateless handler to answer as it always has.
func legacyInitialize(body []byte) (id json.RawMessage, version string, ok bool) {
	// Every tools/call passes here: one that cannot name initialize, written plainly or
	// with escapes, is not decoded.
	if !bytes.Contains(body, []byte(methodInitialize)) && bytes.IndexByte(body, '\\') < 0 {
		return nil, "", false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Method != methodInitialize {
		return nil, "", false
	}
	v := msg.Params.ProtocolVersion
	return msg.ID, v, v != "" && v < revisionStateless
}

// methodInitialize is the JSON-RPC method that opens a session.
const methodInitialize = "initialize"

// sessionLimit bounds the sessions of the stateful handlers, all endpoints
// together. A session is counted from its initialize until the SDK drops
// it: the client deletes it, or it is idle for session_idle_timeout.
type sessionLimit struct {
	surfaces []*surface // their stateful handlers' servers hold the open sessions
	max      int
	refused  func()

	mu       sync.Mutex
	starting int // initializes being served, whose session may not be listed yet
}

// reserve takes a place for one more session, or reports that max are
// open or being opened. release must be called once the initialize has
// been served: by then its session is listed by the server, or was never
// made.
func (l *sessionLimit) reserve() (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open()+l.starting >= l.max {
		return nil, false
	}
	l.starting++
	return func() {
		l.mu.Lock()
		l.starting--
		l.mu.Unlock()
	}, true
}

// open is the number of sessions the stateful servers hold.
func (l *sessionLimit) open() int {
	n := 0
	for _, s := range l.surfaces {
		for range s.sessions.Sessions() {
			n++
		}
	}
	return n
}

// rpcError is the JSON-RPC error response to id that the gateway answers a request it refuses
// before the library reads it with: code, message, and the reason code in its data.
func rpcError(id any, code int, message, reason string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": message, "data": map[string]string{api.MetaReason: reason}}}
}

// refuse answers an initialize past the bound: a 503 the host can show,
// with a JSON-RPC error naming the reason, and counts it.
func (l *sessionLimit) refuse(w http.ResponseWriter, id json.RawMessage, version string) {
	l.refused()
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(rpcError(id, -32000, fmt.Sprintf("The gateway has reached its limit of %d sessions for clients of protocol revision %s; please try again later.",
		l.max, version), api.ReasonSessionLimit))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(60))
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(body)
}
