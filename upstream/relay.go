package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Passing on what a server sends during a call.
//
// A server may ask something (elicitation/create, sampling/createMessage),
// report progress (notifications/progress) or log (notifications/message)
// while a call runs. The caller says per call what it passes on, and to
// whom, with a *Relay; the client ties each message to one call or to
// none, and never hands one call's message to another:
//
//   - A request (a question, a sampling request) names no call. Over one
//     connection shared by several calls it could come from any of them,
//     and relaying it to the wrong call's user would show one user
//     another's question and send back an answer they never gave for it.
//     So it is relayed only while exactly one call is in flight on the
//     client and that call relays it; anything else is refused.
//   - Progress names the token of the request it is about. A call that
//     relays progress is sent with a token of the client's own, unique to
//     the call, and a notification naming that token on the call's own
//     response stream (over streamable HTTP) or on the connection (stdio)
//     is the call's.
//   - A log message names nothing. It is the call's when it comes on the
//     call's own response stream (the event stream of the call's POST over
//     streamable HTTP), which carries nothing about other requests. On
//     stdio it cannot be tied to a call, and is passed to none.
//
// Both are read off the wire below the SDK, in the order the server sent
// them, before the SDK reads the call's response: the SDK hands a
// notification to its handlers on a goroutine of its own, which may run
// after the call has returned. What comes on the connection's standalone
// stream, or on a call's stream the SDK resumed with a GET, is passed to
// no call. Notifications are handed to the Relay on a goroutine of the
// call's own, one at a time and in the order they came, so that neither
// the connection nor the call's stream waits for the caller; all of them
// before the call returns, none after.

// An Asker puts a server's question (a form elicitation) to whoever a
// call is made for, and returns their answer, decline and cancel
// included. The client never answers a question itself.
type Asker func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)

// A Sampler puts a server's sampling request to whoever a call is made
// for, and returns the message their model produced.
type Sampler func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)

// A Relay is what one call passes on from its server to whoever it is made
// for. A nil field passes nothing of its kind: a request is refused with
// ErrQuestionRefused, a notification dropped. A nil *Relay passes nothing.
type Relay struct {
	// Ask takes the server's elicitation/create requests (a client dialed
	// with Options.RelayQuestions).
	Ask Asker
	// Sample takes the server's sampling/createMessage requests (a client
	// dialed with Options.RelaySampling).
	Sample Sampler
	// Progress takes the server's notifications/progress for the call,
	// without the client's token: the caller names its own.
	Progress func(*mcp.ProgressNotificationParams)
	// Log takes the server's notifications/message sent on the call's own
	// response stream.
	Log func(*mcp.LoggingMessageParams)
	// LogLevel, if set, is the level of log messages the call asks the
	// server for (_meta io.modelcontextprotocol/logLevel): a server of
	// 2026-07-28 or later sends log messages for a request only when the
	// request names a level.
	LogLevel mcp.LoggingLevel
}

// Bounds on the notifications a call passes on. A notification past
// either is dropped, and the drops are logged when the call ends.
const (
	// maxQueuedNotes bounds the notifications of one call waiting for its
	// Relay.
	maxQueuedNotes = 64
	// maxNoteBytes bounds the params of one notification, as the server
	// sent them.
	maxNoteBytes = 64 << 10
)

// Notifications a call passes on.
const (
	notificationProgress = "notifications/progress"
	notificationMessage  = "notifications/message"
)

// progressTokenPrefix starts the progress tokens of the client's calls.
const progressTokenPrefix = "upstream-call-"

// ErrQuestionRefused is the answer to a server's request (a question, a
// sampling request) that the client cannot tie to exactly one call that
// relays it.
var ErrQuestionRefused = errors.New("request refused: it cannot be tied to one call that may relay it")

// callRelay is one call in flight on the client: its Relay, its progress
// token ("" when it was sent none), and its notifications waiting for the
// Relay.
type callRelay struct {
	relay *Relay
	token string

	mu      sync.Mutex
	queue   chan func()
	started bool // the goroutine delivering the queue runs
	closed  bool // the call has ended: nothing more is queued
	dropped int
	done    chan struct{}
}

// progressRaw queues a progress notification read from the wire, if it
// names the call's token, without the token.
func (cr *callRelay) progressRaw(params []byte) {
	if cr.token == "" || cr.relay == nil || cr.relay.Progress == nil {
		return
	}
	if len(params) > maxNoteBytes {
		cr.drop()
		return
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if tok, ok := p.ProgressToken.(string); !ok || tok != cr.token {
		return
	}
	out := &mcp.ProgressNotificationParams{Progress: p.Progress, Total: p.Total, Message: p.Message}
	cr.enqueue(func() { cr.relay.Progress(out) })
}

// logRaw queues a log message read on the call's own stream.
func (cr *callRelay) logRaw(params []byte) {
	if cr.relay == nil || cr.relay.Log == nil {
		return
	}
	if len(params) > maxNoteBytes {
		cr.drop()
		return
	}
	var p mcp.LoggingMessageParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	out := &mcp.LoggingMessageParams{Level: p.Level, Logger: p.Logger, Data: p.Data}
	cr.enqueue(func() { cr.relay.Log(out) })
}

// received takes a message decoded from the call's own HTTP response
// stream (captureBody): its log messages, and its progress naming the
// call's token, are the call's.
func (cr *callRelay) received(msg jsonrpc.Message) {
	r, ok := msg.(*jsonrpc.Request)
	if !ok || r.IsCall() {
		return
	}
	switch r.Method {
	case notificationProgress:
		cr.progressRaw(r.Params)
	case notificationMessage:
		cr.logRaw(r.Params)
	}
}

// received takes a message read on a stdio connection: progress naming a
// call's token is that call's.
func (r *callRegistry) received(msg jsonrpc.Message) {
	if r.tokens.Load() == 0 {
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != notificationProgress {
		return
	}
	var p struct {
		ProgressToken any `json:"progressToken"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	if tok, ok := p.ProgressToken.(string); ok {
		if cr := r.byProgressToken(tok); cr != nil {
			cr.progressRaw(req.Params)
		}
	}
}

// enqueue queues deliver, starting the call's delivering goroutine with
// the first; it never waits.
func (cr *callRelay) enqueue(deliver func()) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.closed {
		return
	}
	if !cr.started {
		cr.started = true
		cr.queue = make(chan func(), maxQueuedNotes)
		cr.done = make(chan struct{})
		go func() {
			defer close(cr.done)
			for f := range cr.queue {
				f()
			}
		}()
	}
	select {
	case cr.queue <- deliver:
	default:
		cr.dropped++
	}
}

func (cr *callRelay) drop() {
	cr.mu.Lock()
	if !cr.closed {
		cr.dropped++
	}
	cr.mu.Unlock()
}

// finish queues nothing more and returns once everything queued has been
// delivered, with the number of notifications dropped.
func (cr *callRelay) finish() int {
	cr.mu.Lock()
	cr.closed = true
	started := cr.started
	if started {
		close(cr.queue)
	}
	dropped := cr.dropped
	cr.mu.Unlock()
	if started {
		<-cr.done
	}
	return dropped
}

// callRegistry holds the calls in flight on a client, and those of them
// sent with a progress token by token.
type callRegistry struct {
	seq     atomic.Int64
	tokens  atomic.Int32 // len(byToken), read without the lock
	mu      sync.Mutex
	calls   map[*callRelay]struct{}
	byToken map[string]*callRelay
}

// track records a call in flight, with a progress token of its own when
// withToken, until untrack.
func (r *callRegistry) track(rl *Relay, withToken bool) *callRelay {
	cr := &callRelay{relay: rl}
	if withToken {
		cr.token = progressTokenPrefix + strconv.FormatInt(r.seq.Add(1), 10)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[*callRelay]struct{}{}
	}
	r.calls[cr] = struct{}{}
	if cr.token != "" {
		if r.byToken == nil {
			r.byToken = map[string]*callRelay{}
		}
		r.byToken[cr.token] = cr
		r.tokens.Add(1)
	}
	return cr
}

// untrack ends what track started and returns once the call's
// notifications have been delivered.
func (c *Client) untrack(cr *callRelay) {
	r := &c.calls
	r.mu.Lock()
	delete(r.calls, cr)
	if cr.token != "" {
		delete(r.byToken, cr.token)
		r.tokens.Add(-1)
	}
	r.mu.Unlock()
	if n := cr.finish(); n > 0 {
		c.log.Warn("upstream notifications dropped: too many or too large for one call", "dropped", n)
	}
}

// byProgressToken returns the call sent with tok, nil for none.
func (r *callRegistry) byProgressToken(tok string) *callRelay {
	if r.tokens.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byToken[tok]
}

// sole returns the Relay of the one call in flight, nil when there is
// none or more than one.
func (r *callRegistry) sole() *Relay {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) != 1 {
		return nil
	}
	for cr := range r.calls {
		return cr.relay
	}
	return nil
}

// track records a call in flight on c; see callRegistry.track.
func (c *Client) track(rl *Relay, withToken bool) *callRelay { return c.calls.track(rl, withToken) }

// relayRequest puts a server's request (what, for the log) to the one call
// in flight, through the handler pick finds in its Relay, or refuses it
// with ErrQuestionRefused.
func relayRequest[P, R any](ctx context.Context, c *Client, what string, params P, pick func(*Relay) func(context.Context, P) (R, error)) (R, error) {
	var h func(context.Context, P) (R, error)
	if rl := c.calls.sole(); rl != nil {
		h = pick(rl)
	}
	if h == nil {
		var zero R
		c.log.Warn("upstream " + what + " refused: not tied to exactly one call that relays it")
		return zero, ErrQuestionRefused
	}
	return h(ctx, params)
}

// relayQuestion is the client's elicitation/create handler.
func (c *Client) relayQuestion(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req == nil || req.Params == nil {
		return nil, ErrQuestionRefused
	}
	return relayRequest(ctx, c, "question", req.Params, func(rl *Relay) func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return rl.Ask
	})
}

// relaySample is the client's sampling/createMessage handler.
func (c *Client) relaySample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	if req == nil || req.Params == nil {
		return nil, ErrQuestionRefused
	}
	return relayRequest(ctx, c, "sampling request", req.Params, func(rl *Relay) func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return rl.Sample
	})
}

// callMeta is what a call adds to the _meta of its request: its progress
// token and the log level it asks for.
func callMeta(meta map[string]any, cr *callRelay) map[string]any {
	level := mcp.LoggingLevel("")
	if cr.relay != nil {
		level = cr.relay.LogLevel
	}
	if cr.token == "" && level == "" {
		return meta
	}
	out := make(map[string]any, len(meta)+2)
	maps.Copy(out, meta)
	if cr.token != "" {
		out[metaProgressToken] = cr.token
	}
	if level != "" {
		out[mcp.MetaKeyLogLevel] = string(level)
	}
	return out
}

// metaProgressToken is the _meta key of a request's progress token.
const metaProgressToken = "progressToken"

// progressTokenOf returns the progress token a tools/call request in b was
// sent with, "" for none.
func progressTokenOf(b []byte) string {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &m) != nil || m.Method != methodCallTool {
		return ""
	}
	tok, _ := m.Params.Meta.ProgressToken.(string)
	return tok
}
