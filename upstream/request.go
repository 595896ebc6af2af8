package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/tracing"
)

// Requests on a server's connection.
//
// A tool call made through the SDK's client (call.go) and every request
// passed through for the gateway (a resource's read, a prompt's get, a
// completion, a subscription, the logging level) are sent by one function,
// request, with the method and the SDK's call of it as parameters: each
// waits for a connection, is ended by Close, carries the caller's trace
// context in _meta, and fails with a *CallError of one kind of those
// [Client.Call] documents, decided alike (classify). A result the SDK
// decodes is returned as it decoded it, with, when asked for, the exact
// bytes of the response's "result" member as the server sent them (see
// rawcall.go). Nothing is retried.

// MCP methods passed through.
const (
	methodReadResource = "resources/read"
	methodGetPrompt    = "prompts/get"
	methodComplete     = "completion/complete"
	methodSubscribe    = "resources/subscribe"
	methodUnsubscribe  = "resources/unsubscribe"
	methodSetLevel     = "logging/setLevel"
)

// request sends params, a request of method, on the current connection
// with send, the SDK's call of method. name is what the request names (a
// tool, a resource's URI, a prompt), for its errors. raw asks for the
// result's bytes: nil when they cannot be bound to this request (a
// response larger than the capture bound). rl is what the request relays
// (relay.go), nil for nothing. A result that asks for input (a 2026-07-28
// server's input_required) is returned with ErrInputRequired.
func request[P mcp.Params, R any](ctx context.Context, c *Client, method, name string, params P, raw bool, rl *Relay,
	send func(*mcp.ClientSession, context.Context, P) (R, error)) (R, json.RawMessage, error) {
	var zero R
	// A call relaying progress is sent with a token of its own; one relaying
	// log messages over HTTP too, since the token is what ties the call's
	// response stream to it below the SDK (relay.go, capture.go).
	withToken := rl != nil && (rl.Progress != nil || rl.Log != nil && c.http != nil)
	cr := c.track(rl, withToken)
	defer c.untrack(cr)
	// The trace context of the request goes on to the server in _meta
	// (traceparent, tracestate), as MCP carries W3C trace context; without
	// one nothing is added.
	params.SetMeta(callMeta(tracing.InjectMeta(ctx, params.GetMeta()), cr))
	var slot *rawSlot
	if raw {
		slot = &rawSlot{}
		defer slot.release()
	}
	ctx, cn, done, kind, cause := c.open(ctx)
	if kind != nil {
		return zero, nil, c.failed(method, name, kind, cause)
	}
	defer done()
	// What the transports below the SDK report of this request goes to
	// slot, sent and end (trace.go).
	sent, end := &sendTrace{}, newStreamEnd()
	res, err := send(cn.sess, withTrace(ctx, &requestTrace{method: method, slot: slot, send: sent, end: end}), params)
	if err == nil {
		end.wait(ctx) // see streamend.go
	}
	if re, ok := errors.AsType[*requestError](err); ok {
		return zero, nil, c.failed(method, name, ErrRejected, re.err)
	}
	if err != nil {
		kind := classify(ctx, err)
		if kind == ErrOutcomeUnknown && neverSent(err, sent) {
			kind = ErrUnavailable
		}
		if kind != ErrRejected && ctx.Err() == nil {
			// The transport failed: reconnect now rather than when the
			// session notices.
			c.retire(cn, err)
		}
		return zero, nil, c.failed(method, name, kind, closedInFlight(ctx, err))
	}
	var b json.RawMessage
	if slot != nil {
		slot.release()
		b = slot.take()
	}
	if r, ok := any(res).(interface{ NeedsInput() bool }); ok && r.NeedsInput() {
		return res, b, c.failed(method, name, ErrInputRequired, nil)
	}
	return res, b, nil
}

// failed is the error of a request of method naming name.
func (c *Client) failed(method, name string, kind, err error) *CallError {
	return &CallError{Server: c.id, Method: method, Tool: name, Kind: kind, Err: err}
}

// ReadResource reads the resource at uri (resources/read) and returns the
// result as the SDK decoded it and the exact bytes of its "result" member
// as the server sent them, nil when they cannot be bound to this request
// (see rawcall.go). Errors are those of [Client.Call]: a server's
// refusal (an unknown resource) is ErrRejected, an input_required result
// comes with ErrInputRequired. The decoded result's TTLMs is zero (the
// client keeps no read, see capture.go); the server's ttlMs is in the
// bytes.
func (c *Client) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, json.RawMessage, error) {
	return request(ctx, c, methodReadResource, uri, &mcp.ReadResourceParams{URI: uri}, true, nil, (*mcp.ClientSession).ReadResource)
}

// GetPrompt gets the prompt named name with args (prompts/get); results
// and errors as ReadResource's.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, json.RawMessage, error) {
	return request(ctx, c, methodGetPrompt, name, &mcp.GetPromptParams{Name: name, Arguments: args}, true, nil, (*mcp.ClientSession).GetPrompt)
}

// Complete asks the server to complete an argument (completion/complete)
// with params as given; results and errors as ReadResource's. The caller's
// params are not modified.
func (c *Client) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, json.RawMessage, error) {
	if params == nil {
		return nil, nil, c.failed(methodComplete, "", ErrRejected, errors.New("no parameters"))
	}
	p := *params
	p.Meta = maps.Clone(params.Meta)
	name := ""
	if p.Ref != nil {
		name = cmp.Or(p.Ref.Name, p.Ref.URI)
	}
	return request(ctx, c, methodComplete, name, &p, true, nil, (*mcp.ClientSession).Complete)
}

// emptyResult stands for the empty result of a request whose SDK call
// returns only an error.
type emptyResult struct{}

// noResult adapts an SDK call that returns no result to request.
func noResult[P mcp.Params](f func(*mcp.ClientSession, context.Context, P) error) func(*mcp.ClientSession, context.Context, P) (emptyResult, error) {
	return func(s *mcp.ClientSession, ctx context.Context, p P) (emptyResult, error) {
		return emptyResult{}, f(s, ctx, p)
	}
}

// Subscribe asks the server for notifications/resources/updated about uri
// (resources/subscribe; on a 2026-07-28 server the SDK opens a
// subscriptions/listen stream for it instead, whose answer it does not wait
// for). Once the server has accepted, the client keeps the subscription:
// it subscribes again on every new connection, and reports uri to
// Options.ResourceUpdated then, since an update sent while no connection
// was up is lost. A URI is subscribed once however often Subscribe is
// called; one Unsubscribe ends it. Errors are those of [Client.Call].
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	if err := c.subscribe(ctx, uri); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		c.subs = map[string]bool{}
	}
	c.subs[uri] = true
	return nil
}

func (c *Client) subscribe(ctx context.Context, uri string) error {
	_, _, err := request(ctx, c, methodSubscribe, uri, &mcp.SubscribeParams{URI: uri}, false, nil, noResult((*mcp.ClientSession).Subscribe))
	return err
}

// Unsubscribe ends the subscription to uri (resources/unsubscribe); the
// client no longer renews it, whatever the server answers. Errors are
// those of [Client.Call].
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	c.mu.Lock()
	delete(c.subs, uri)
	c.mu.Unlock()
	_, _, err := request(ctx, c, methodUnsubscribe, uri, &mcp.UnsubscribeParams{URI: uri}, false, nil, noResult((*mcp.ClientSession).Unsubscribe))
	return err
}

// SetLoggingLevel sets the level of the log messages the server sends
// (logging/setLevel) on the current connection; a new connection starts
// at the server's default. Errors are those of [Client.Call]. A connection
// of revision 2026-07-28 or later has no such request (SEP-2577): it is
// refused with ErrRejected without being sent.
func (c *Client) SetLoggingLevel(ctx context.Context, level mcp.LoggingLevel) error {
	_, _, err := request(ctx, c, methodSetLevel, string(level), &mcp.SetLoggingLevelParams{Level: level}, false, nil,
		func(s *mcp.ClientSession, ctx context.Context, p *mcp.SetLoggingLevelParams) (emptyResult, error) {
			if v := revision(s); v >= plainRevision {
				// The SDK would send it, and the server refuse it.
				return emptyResult{}, &requestError{fmt.Errorf("revision %s has no %s", v, methodSetLevel)}
			}
			return emptyResult{}, s.SetLoggingLevel(ctx, p)
		})
	return err
}

// revision is the protocol revision negotiated on s.
func revision(s *mcp.ClientSession) string {
	if r := s.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// resubscribe renews the client's subscriptions on a new connection, and
// reports each URI updated: an update sent while no connection was up is
// lost. A renewal that fails is logged; the subscription is kept, to be
// renewed on the next connection.
func (c *Client) resubscribe() {
	c.mu.Lock()
	uris := slices.Sorted(maps.Keys(c.subs))
	c.mu.Unlock()
	if len(uris) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.connectTimeout())
	defer cancel()
	for _, uri := range uris {
		if err := c.subscribe(ctx, uri); err != nil && c.ctx.Err() == nil {
			c.log.Warn("upstream subscription not renewed", "uri", uri, "err", err)
		}
		c.updated(uri)
	}
}

// maxQueuedUpdates bounds the URIs waiting for Options.ResourceUpdated. A
// URI already waiting is not queued twice, so only a server reporting
// updates of more distinct resources than this, faster than the hook
// takes them, loses some; each loss is logged.
const maxQueuedUpdates = 1024

// updateQueue hands the URIs of notifications/resources/updated to
// Options.ResourceUpdated on a goroutine of its own, in the order they
// came, so that the goroutine reading the connection never waits for the
// hook. A URI already waiting is not queued again: the notification says
// only that the resource changed.
type updateQueue struct {
	mu      sync.Mutex
	order   []string
	queued  map[string]bool
	running bool // a goroutine is delivering
	closed  bool
	wg      sync.WaitGroup
}

// updated queues uri for Options.ResourceUpdated, if set. It never waits.
func (c *Client) updated(uri string) {
	if c.opts.ResourceUpdated == nil {
		return
	}
	q := &c.updates
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed || q.queued[uri]:
		return
	case len(q.order) >= maxQueuedUpdates:
		c.log.Warn("upstream resource update dropped: too many waiting", "uri", uri, "waiting", len(q.order))
		return
	}
	if q.queued == nil {
		q.queued = map[string]bool{}
	}
	q.order = append(q.order, uri)
	q.queued[uri] = true
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go c.deliverUpdates()
	}
}

func (c *Client) deliverUpdates() {
	q := &c.updates
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.order) == 0 || q.closed {
			q.running = false
			q.mu.Unlock()
			return
		}
		uri := q.order[0]
		q.order = q.order[1:]
		delete(q.queued, uri)
		q.mu.Unlock()
		c.opts.ResourceUpdated(uri)
	}
}

// close stops the deliveries: once it returns, the hook is not called
// again.
func (q *updateQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.order, q.queued = nil, nil
	q.mu.Unlock()
	q.wg.Wait()
}
