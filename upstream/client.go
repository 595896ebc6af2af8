package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is a supervised MCP connection to one server. When the
// connection ends (the child exits, the HTTP session fails) it reconnects
// in the background with exponential backoff; calls made meanwhile wait
// for the new connection until their context ends. It is safe for
// concurrent use.
type Client struct {
	id      string
	cfg     Config
	opts    Options
	log     *slog.Logger
	mcp     *mcp.Client
	capture *listCapture
	http    *http.Client
	// stderr is the standard error of the latest stdio process; nil for
	// HTTP servers.
	stderr atomic.Pointer[stderrLog]

	listMu sync.Mutex // serializes tools/list, see listCapture

	// plain is what a plain call copies from the SDK's requests on the current
	// connection (nil: calls go through the SDK); plainSeq numbers its calls.
	plain    plainState
	plainSeq atomic.Int64
	// plainURL and plainAddr are the server's URL and address when plain
	// calls are sent by plainConns (see package plainhttp), else nil and "".
	plainURL   *url.URL
	plainAddr  string
	plainConns plainhttp.Pool

	ctx    context.Context // supervisor lifetime
	cancel context.CancelFunc
	done   chan struct{}

	// calls are the calls in flight, for what they relay (relay.go).
	calls callRegistry

	// rootsMu orders SetRoots; roots are the URIs of the roots set.
	rootsMu sync.Mutex
	roots   []string

	// updates hands notifications/resources/updated to
	// Options.ResourceUpdated (see request.go).
	updates updateQueue
	// renewals are the subscriptions' renewals after reconnects; Close
	// waits for them.
	renewals sync.WaitGroup

	mu      sync.Mutex
	subs    map[string]bool // URIs subscribed to, renewed on every connection
	cur     *conn           // nil while reconnecting
	up      chan struct{}   // closed when cur is set or the client closes
	lastErr error
	closed  bool
}

// conn is one MCP session and the requests using it. A session taken out
// of service is closed only when its last request has finished, so that
// one failing HTTP request does not abort its neighbours.
type conn struct {
	sess *mcp.ClientSession
	// stdio is the transport connection of a stdio session, nil for
	// HTTP. Closing it ends the requests still waiting on the session,
	// which the session's own Close would wait for.
	stdio    *stdioConn
	inflight sync.WaitGroup // Add only under Client.mu while conn is current
	retired  chan struct{}  // closed by retire
	once     sync.Once
}

// Dial validates cfg, connects to the server, and returns a client that
// keeps the connection alive until Close. id is the deployment's server
// id, used in errors and logs. Dial fails if the first connection cannot
// be made before ctx ends or Options.ConnectTimeout passes.
func Dial(ctx context.Context, id string, cfg Config, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("upstream %s: %w", id, err)
	}
	impl := cmp.Or(opts.Implementation, &mcp.Implementation{Name: "verdict-upstream", Version: "1"})
	c := &Client{
		id:      id,
		cfg:     cfg,
		opts:    opts,
		log:     opts.logger().With("server", id),
		capture: newListCapture(),
		done:    make(chan struct{}),
		up:      make(chan struct{}),
	}
	// The client acts for no user: no roots, no sampling, no elicitation,
	// and an upstream input_required comes back to the caller instead of
	// being answered here.
	mopts := &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if opts.RelayQuestions {
		// Questions go to the caller's Asker, never answered here.
		mopts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
		mopts.ElicitationHandler = c.relayQuestion
	}
	if opts.RelaySampling {
		// Sampling requests go to the caller's Sampler, never answered here.
		mopts.CreateMessageHandler = c.relaySample
	}
	if opts.Roots != nil {
		mopts.Capabilities.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	}
	// Only when someone listens: a handler makes the SDK hold a
	// subscriptions/listen stream open on 2026-07-28 servers.
	mopts.ToolListChangedHandler = notifyHandler[*mcp.ToolListChangedRequest](opts.ToolListChanged)
	mopts.ResourceListChangedHandler = notifyHandler[*mcp.ResourceListChangedRequest](opts.ResourceListChanged)
	mopts.PromptListChangedHandler = notifyHandler[*mcp.PromptListChangedRequest](opts.PromptListChanged)
	if opts.ResourceUpdated != nil {
		mopts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params != nil {
				c.updated(req.Params.URI)
			}
		}
	}
	c.mcp = mcp.NewClient(impl, mopts)
	c.mcp.AddSendingMiddleware(uncachedListings)
	if opts.Roots != nil {
		c.SetRoots(opts.Roots) // no session yet: nobody is notified
	}
	if cfg.URL != "" {
		c.http = httpClient(opts.HTTPClient, cfg.Headers, c.capture, &c.plain, &c.calls)
		if u, err := url.Parse(cfg.URL); err == nil && opts.HTTPClient == nil {
			if c.plainAddr = plainhttp.Addr(u); c.plainAddr != "" {
				c.plainURL = u
			}
		}
	}
	cn, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w: %w", id, ErrUnavailable, err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cur = cn
	close(c.up)
	go c.supervise(c.cur)
	return c, nil
}

// ID returns the server id the client was dialed with.
func (c *Client) ID() string { return c.id }

func httpClient(base *http.Client, headers map[string]string, capture *listCapture, plain *plainState, calls *callRegistry) *http.Client {
	hc := &http.Client{}
	if base != nil {
		*hc = *base
	}
	rt := cmp.Or(hc.Transport, http.DefaultTransport)
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	// A request sent by the Transport itself, or by a plainhttp.Transport that traces it as
	// the Transport does, can be traced to its connection (sendtrace.go).
	hc.Transport = &roundTripper{base: rt, headers: h, capture: capture, plain: plain, calls: calls, traced: tracesConnections(rt)}
	return hc
}

// tracesConnections reports whether rt reports each request's connections to its
// httptrace.ClientTrace as net/http's Transport does, with retries only of what was not
// written: the Transport itself, or a plainhttp.Transport over it.
func tracesConnections(rt http.RoundTripper) bool {
	switch t := rt.(type) {
	case *http.Transport:
		return true
	case *plainhttp.Transport:
		return tracesConnections(t.Base())
	}
	return false
}

// childEnv is the environment of a stdio child: a few neutral variables
// from the parent, then the configured ones.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, override := extra[k]; !override {
				env = append(env, k+"="+v)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

func (c *Client) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.connectTimeout())
	defer cancel()
	var (
		t     mcp.Transport
		stdio *commandTransport
	)
	if len(c.cfg.Command) > 0 {
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Env = childEnv(c.cfg.Env)
		// Each process gets a tail of its own: a failure quotes what that
		// attempt said, not what an earlier one did.
		stdio = &commandTransport{cmd: cmd, stderr: newStderrLog(c.log)}
		c.stderr.Store(stdio.stderr)
		t = captureTransport{stdio, c.capture, &c.calls}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: c.http}
	}
	sess, err := c.mcp.Connect(ctx, t, nil)
	if err != nil {
		if stdio == nil {
			return nil, err
		}
		if stdio.conn != nil {
			// Ends the child if the SDK has not (it does not on every
			// path), and waits for its last words: the tail is complete
			// once the process has been reaped.
			stdio.conn.Close()
		}
		return nil, withStderr(c.id, stdio.stderr, err)
	}
	cn := &conn{sess: sess, retired: make(chan struct{})}
	if stdio != nil {
		cn.stdio = stdio.conn
	}
	return cn, nil
}

// supervise replaces the current connection when it ends or a request
// retires it, backing off exponentially while attempts fail or
// connections die young.
func (c *Client) supervise(cur *conn) {
	defer close(c.done)
	first, max := c.opts.restartDelays()
	delay := first
	for {
		started := time.Now()
		ended := make(chan error, 1)
		go func(s *mcp.ClientSession) { ended <- s.Wait() }(cur.sess)
		var cause error
		select {
		case err := <-ended:
			cause = fmt.Errorf("connection ended: %v", err)
		case <-cur.retired:
			cause = errors.New("connection failed a request")
		case <-c.ctx.Done():
			return
		}
		c.retire(cur, cause)
		// A child that died says why on its stderr, if anywhere.
		c.log.Warn("upstream connection lost", stderrAttrs(cause, c.stderr.Load())...)
		if time.Since(started) > max {
			delay = first // it had been healthy: restart promptly
		}
		for {
			select {
			case <-time.After(delay):
			case <-c.ctx.Done():
				return
			}
			delay = min(2*delay, max)
			next, err := c.connect(c.ctx)
			if err != nil {
				c.mu.Lock()
				c.lastErr = err
				c.mu.Unlock()
				logFailure(c.log, "upstream reconnect failed", err, "retry_in", delay)
				continue
			}
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				next.sess.Close()
				return
			}
			cur = next
			c.cur = cur
			close(c.up)
			c.mu.Unlock()
			c.log.Info("upstream reconnected")
			// The new connection may list other tools, resources or
			// prompts, and an announcement sent while none was up is lost.
			for _, changed := range []func(){c.opts.ToolListChanged, c.opts.ResourceListChanged, c.opts.PromptListChanged} {
				if changed != nil {
					changed()
				}
			}
			// Not on this goroutine: a renewal waits for the connection,
			// which may need replacing again.
			c.renewals.Go(c.resubscribe)
			break
		}
	}
}

// retire takes cn out of service, so that new requests wait for its
// replacement instead of failing on a dead connection, and closes it once
// its last request has finished.
func (c *Client) retire(cn *conn, cause error) {
	c.mu.Lock()
	if c.cur == cn {
		c.cur = nil
		// The next connection may speak another revision: plain calls wait
		// for the SDK's first listing on it.
		c.plain.Store(nil)
		if !c.closed {
			c.up = make(chan struct{})
		}
		c.lastErr = cause
	}
	c.mu.Unlock()
	cn.once.Do(func() {
		close(cn.retired)
		go func() {
			cn.inflight.Wait()
			cn.sess.Close()
		}()
	})
}

// errClosedInFlight is the cause of a request ended by Close. It is not
// a kind: the request's kind says what it may have done.
var errClosedInFlight = errors.New("client closed while the request was in flight")

// closedInFlight wraps err with errClosedInFlight when it was Close, not
// the caller, that ended ctx.
func closedInFlight(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errClosedInFlight) {
		return fmt.Errorf("%w: %w", errClosedInFlight, err)
	}
	return err
}

// acquire returns the current connection with a request counted on it,
// waiting for a reconnect until ctx ends. The caller must call
// cn.inflight.Done.
func (c *Client) acquire(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		cn, up, closed, lastErr := c.cur, c.up, c.closed, c.lastErr
		if cn != nil && !closed {
			cn.inflight.Add(1)
		}
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if cn != nil {
			return cn, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w (last error: %v)", ErrUnavailable, ctx.Err(), lastErr)
		}
	}
}

// open acquires the current connection for a request (acquire) and binds
// ctx to the client: the context it returns also ends when the client
// closes, so that Close ends a request in flight instead of waiting for it
// (the SDK's session Close on HTTP waits for pending requests to finish).
// done releases both. When it cannot, nothing was sent: kind is ErrClosed,
// or ErrUnavailable with acquire's error as cause.
func (c *Client) open(ctx context.Context) (_ context.Context, _ *conn, done func(), kind, cause error) {
	cn, err := c.acquire(ctx)
	if errors.Is(err, ErrClosed) {
		return nil, nil, nil, ErrClosed, nil
	}
	if err != nil {
		return nil, nil, nil, ErrUnavailable, err
	}
	if c.ctx.Err() != nil {
		// Closed since acquire.
		cn.inflight.Done()
		return nil, nil, nil, ErrClosed, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.ctx, func() { cancel(errClosedInFlight) })
	return ctx, cn, func() { stop(); cancel(nil); cn.inflight.Done() }, nil, nil
}

// codeRejectedByTransport is the code of the SDK's jsonrpc2.ErrRejected,
// a *jsonrpc.Error the streamable client transport makes up itself (the
// package that declares it is internal to the SDK).
const codeRejectedByTransport = -32005

// classify decides what a failed call may have done. Only an answer from
// the server proves that nothing ran; a cancelled or timed-out call, or a
// connection lost after the request was handed to the transport, may
// have run. A request ended by Close is a cancelled one.
//
// The SDK's HTTP transport reports a 5xx or 429 status, and any failure
// of the HTTP round trip (a connection reset or closed before the
// response, after the request was written), as a *jsonrpc.Error of its
// own, "rejected by transport". That is no answer from the server: the
// tool may have run before the server crashed or a proxy gave up. Such a
// call is ErrOutcomeUnknown, unless the server's own JSON-RPC error came
// with it (a 4xx answer carrying an error object). The same error wraps a
// request that reached no connection at all; the caller tells that one
// from the others by the request's trace (sendtrace.go), not by the error.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ErrOutcomeUnknown
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The server answered 404 for the session: it dispatched nothing.
		return ErrUnavailable
	}
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return ErrOutcomeUnknown
	}
	if serverError(err) {
		return ErrRejected
	}
	return ErrOutcomeUnknown
}

// serverError reports whether err's tree holds a JSON-RPC error other
// than the transport's own "rejected by transport".
func serverError(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *jsonrpc.Error:
		if e.Code != codeRejectedByTransport {
			return true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return serverError(u.Unwrap())
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(u.Unwrap(), serverError)
	}
	return false
}

// notifyHandler is the SDK's handler of a notification that calls hook, or nil (no handler)
// when hook is nil.
func notifyHandler[R any](hook func()) func(context.Context, R) {
	if hook == nil {
		return nil
	}
	return func(context.Context, R) { hook() }
}

// Close ends the connection and stops reconnecting. Requests in flight
// end at once, on stdio and HTTP alike: a tool call with
// ErrOutcomeUnknown (the server may have run it), a listing with an
// error. A stdio child is then asked to exit (its input closed, then
// SIGTERM and SIGKILL 5s apart) and Close waits for it; an HTTP session
// is ended in the background, without waiting for the server.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cn := c.cur
	c.cur = nil
	select {
	case <-c.up:
	default:
		close(c.up)
	}
	c.mu.Unlock()
	// Every request is bound to c.ctx (see open): this ends them all, on
	// the current connection and on retired ones.
	c.cancel()
	c.updates.close()
	c.plainConns.Close()
	var err error
	switch {
	case cn == nil:
	case cn.stdio != nil:
		// Closing the transport first fails whatever the cancellation
		// has not, instead of the session waiting for it.
		cn.stdio.Close()
		err = cn.sess.Close()
	default:
		// The SDK ends an HTTP session with a DELETE, which a stateful
		// server answers only when its handlers have returned, and the
		// cancellations of the requests just ended need not reach it.
		// So neither Close nor those requests wait for it: the session
		// is ended in the background, and only after the requests have
		// returned, since the SDK has the last request to leave a
		// closing session send the DELETE itself.
		go func() {
			cn.inflight.Wait()
			cn.sess.Close()
		}()
	}
	<-c.done
	// The supervisor has returned: it starts no renewal after this.
	c.renewals.Wait()
	return err
}
