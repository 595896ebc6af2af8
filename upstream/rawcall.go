package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK decodes a tool result's structuredContent into Go values with
// float64 numbers and keeps no bytes, so a decimal of more than 15
// significant digits may reach the caller as a nearby double that is
// also the exact decoding of a shorter literal. A caller that must know
// the numbers as sent (a measurement settling a slot) asks for the result's
// bytes (ToolCall.Raw): [Client.Call] then also returns the "result" bytes
// of the JSON-RPC response to that very call, taken from the wire below the
// SDK as tools/list results are, exactly as sent (whitespace included).
//
// The capture is bound to the call, not to the client: such a call hands
// the transports a slot in the request's trace (trace.go), which names the
// request's method. On stdio the wrapped connection, seeing the tools/call
// request written under that trace, files the slot under the request's id
// in a table of its own, and the response with that id read from the same
// connection fills it. On HTTP
// the RoundTripper reads the id from the POST carrying the request and
// fills the slot from that response's body (JSON or SSE), or from a GET
// resuming that stream, which the SDK makes under the same context. A
// response to any other request, or arriving on another connection,
// never reaches the slot, so concurrent calls never see each other's
// bytes, and a call whose trace does not reach the transports gets none.
// A call without a slot is not inspected beyond what the listings' capture
// already does. The requests passed through for the gateway
// (resources/read, prompts/get, completion/complete; see request.go) carry
// a slot of their own in the same way, bound to their method.

const methodCallTool = "tools/call"

// rawSlot receives the result bytes of one request (a tools/call, or a
// request passed through), whose trace holds it. It is filled at most
// once, by the first response carrying the id of the one request of the
// trace's method sent under it.
type rawSlot struct {
	mu        sync.Mutex
	id        jsonrpc.ID
	sent      bool
	ambiguous bool // more than one tools/call request under one slot
	filled    bool
	result    json.RawMessage
	// table is the stdio connection's table the slot is filed in, so
	// that the call can remove it when it ends unanswered.
	table *callTable
}

// bind records the id of the request of the trace's method sent under it.
// A second such request under the same slot (which the SDK does not make
// for one request) makes the capture ambiguous, and the request gets no
// bytes.
func (s *rawSlot) bind(id jsonrpc.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent {
		s.ambiguous = true
		return false
	}
	s.id, s.sent = id, true
	return true
}

// spoil marks the capture ambiguous: the call gets no bytes.
func (s *rawSlot) spoil() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ambiguous = true
}

// boundID returns the id bound by bind, if any.
func (s *rawSlot) boundID() (jsonrpc.ID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.sent && !s.ambiguous
}

// received fills the slot from msg if msg is the response to the
// slot's request. It implements receiver, for HTTP bodies.
func (s *rawSlot) received(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sent || s.filled || resp.ID != s.id {
		return
	}
	s.filled = true
	if resp.Error == nil {
		s.result = bytes.Clone(resp.Result)
	}
}

// take returns the captured result, or nil if there is none to trust.
func (s *rawSlot) take() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sent || s.ambiguous || !s.filled {
		return nil
	}
	return s.result
}

// release removes the slot from a stdio connection's table, for a call
// that ended without its response (cancelled, connection lost).
func (s *rawSlot) release() {
	s.mu.Lock()
	t, id, sent := s.table, s.id, s.sent
	s.mu.Unlock()
	if t != nil && sent {
		t.remove(id, s)
	}
}

// callTable holds the slots of one stdio connection's raw calls in
// flight, by request id. n lets a response to a call without a slot
// pass with one atomic load.
type callTable struct {
	n     atomic.Int32
	mu    sync.Mutex
	slots map[jsonrpc.ID]*rawSlot
}

func (t *callTable) add(id jsonrpc.ID, s *rawSlot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if other, dup := t.slots[id]; dup {
		// The SDK numbers a connection's requests uniquely; were an id
		// reused while one is pending, neither call could be told from
		// the other, so neither gets bytes.
		other.spoil()
		s.spoil()
		return
	}
	if t.slots == nil {
		t.slots = map[jsonrpc.ID]*rawSlot{}
	}
	t.slots[id] = s
	t.n.Add(1)
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
}

func (t *callTable) remove(id jsonrpc.ID, s *rawSlot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots[id] == s {
		delete(t.slots, id)
		t.n.Add(-1)
	}
}

// sent files the slot of the trace in ctx, if any, under the id of msg,
// the request of the trace's method, before the request is written.
func (t *callTable) sent(ctx context.Context, msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return
	}
	tr := traceOf(ctx)
	if tr.slot == nil || req.Method != tr.method {
		return
	}
	if tr.slot.bind(req.ID) {
		t.add(req.ID, tr.slot)
	}
}

// received fills the slot filed under msg's id, if msg is a response.
func (t *callTable) received(msg jsonrpc.Message) {
	if t.n.Load() == 0 {
		return
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	t.mu.Lock()
	s, ok := t.slots[resp.ID]
	if ok {
		delete(t.slots, resp.ID)
		t.n.Add(-1)
	}
	t.mu.Unlock()
	if ok {
		s.received(resp)
	}
}
