package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dynamicServerMode, as the value of helperServerEnv, makes the test
// binary run a dynServer over stdio, starting with the variant written in
// the file named by dynamicVariantEnv, if any, and with the ttl in
// milliseconds given by dynamicTTLEnv, if any (see newDynServerTTL).
const (
	dynamicServerMode = "dynamic"
	dynamicVariantEnv = "UPSTREAM_TEST_DYNAMIC_VARIANT_FILE"
	dynamicTTLEnv     = "UPSTREAM_TEST_DYNAMIC_TTL_MS"
)

// dynServer is a real go-sdk MCP server whose tools change while clients
// are connected; the SDK announces every change to them with
// notifications/tools/list_changed. It lists "target" (whose schema
// carries the current variant), "doomed" until removed, "mutate", which
// changes both from the client's side: {"variant": N, "remove": [names]},
// and "pid", which answers the server's process id. Every answer to
// tools/list also lists "serial", whose schema carries the number of that
// tools/list request ({"const": N}, counted from 1 per server), so a
// listing shows which request of the server it answers. Tests in the
// same process can also hold or fail its tools/list answers.
type dynServer struct {
	srv   *mcp.Server
	lists atomic.Int64 // tools/list requests received

	mu      sync.Mutex
	held    chan struct{} // non-nil: tools/list waits until it is closed
	failing bool          // tools/list answers with a JSON-RPC error
}

func dynSchema(variant int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"v":{"const":%d}}}`, variant))
}

// dynDigest is the digest of target's definition in variant.
func dynDigest(t testing.TB, variant int) string {
	t.Helper()
	d, err := DefinitionDigest("target", "", dynSchema(variant))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func noopTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

// serialDigest is the digest of serial's definition in the n-th listing.
func serialDigest(t testing.TB, n int64) string {
	t.Helper()
	d, err := DefinitionDigest("serial", "", json.RawMessage(fmt.Sprintf(`{"const":%d}`, n)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newDynServer(variant int) *dynServer { return newDynServerTTL(variant, 0) }

// newDynServerTTL is newDynServer whose tools/list results say, with
// ttlMs, that they may be cached for ttl (SEP-2549; clients of the
// 2026-07-28 revision honour it).
func newDynServerTTL(variant int, ttl time.Duration) *dynServer {
	var opts *mcp.ServerOptions
	if ttl > 0 {
		opts = &mcp.ServerOptions{SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			if _, ok := req.(*mcp.ListToolsRequest); ok {
				c.TTLMs = int(ttl.Milliseconds())
			}
		}}
	}
	d := &dynServer{srv: mcp.NewServer(&mcp.Implementation{Name: "dynamic", Version: "1"}, opts)}
	d.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != methodListTools {
				return next(ctx, method, req)
			}
			n := d.lists.Add(1)
			if err := d.wait(ctx); err != nil {
				return nil, err
			}
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			// A copy: the listed tools are the server's own.
			out := *lr
			out.Tools = append(slices.Clone(lr.Tools), &mcp.Tool{Name: "serial",
				InputSchema: json.RawMessage(fmt.Sprintf(`{"const":%d}`, n))})
			return &out, nil
		}
	})
	d.setVariant(variant)
	d.srv.AddTool(&mcp.Tool{Name: "pid", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
		})
	d.srv.AddTool(&mcp.Tool{Name: "doomed", InputSchema: json.RawMessage(`{"type":"object"}`)}, noopTool)
	d.srv.AddTool(&mcp.Tool{Name: "mutate", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Variant int      `json:"variant"`
				Remove  []string `json:"remove"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			d.setVariant(args.Variant)
			if len(args.Remove) > 0 {
				d.srv.RemoveTools(args.Remove...)
			}
			return noopTool(ctx, req)
		})
	return d
}

// setVariant replaces target's definition; the SDK announces it.
func (d *dynServer) setVariant(n int) {
	d.srv.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(n)}, noopTool)
}

func (d *dynServer) wait(ctx context.Context) error {
	d.mu.Lock()
	held, failing := d.held, d.failing
	d.mu.Unlock()
	if failing {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "listing unavailable"}
	}
	if held == nil {
		return nil
	}
	select {
	case <-held:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hold makes tools/list wait until release.
func (d *dynServer) hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		d.held = make(chan struct{})
	}
}

func (d *dynServer) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		close(d.held)
		d.held = nil
	}
}

func (d *dynServer) fail(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failing = on
}

func runDynamicServer() int {
	variant := 0
	if name := os.Getenv(dynamicVariantEnv); name != "" {
		b, err := os.ReadFile(name)
		if err == nil {
			variant, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dynamic server:", err)
			return 1
		}
	}
	var ttl time.Duration
	if v := os.Getenv(dynamicTTLEnv); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dynamic server:", err)
			return 1
		}
		ttl = time.Duration(ms) * time.Millisecond
	}
	if err := newDynServerTTL(variant, ttl).srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "dynamic server:", err)
		return 1
	}
	return 0
}

// dynStdio is the config of a dynServer child spoken to over stdio.
func dynStdio(t testing.TB) Config {
	cfg := helperConfig(t)
	cfg.Env = map[string]string{helperServerEnv: dynamicServerMode}
	return cfg
}

// serveDyn serves d over streamable HTTP in this process. Stateless
// serves the 2026-07-28 revision, whose announcements travel on a
// subscriptions/listen stream; stateful sessions speak an older revision
// and receive them on the standalone event stream.
func serveDyn(t testing.TB, d *dynServer, stateless bool) Config {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return d.srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(hs.Close)
	// Runs before hs.Close: a held listing must not keep it waiting.
	t.Cleanup(d.release)
	return Config{URL: hs.URL}
}

// waitFor polls cond until it holds, failing t when the test's context
// ends first.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx := testContext(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting until %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func status(t testing.TB, c *Catalog, id string) ServerStatus {
	t.Helper()
	for _, st := range c.Status() {
		if st.ID == id {
			return st
		}
	}
	t.Fatalf("no status for %s", id)
	return ServerStatus{}
}

// TestCatalogFollowsToolListChanged changes a real server's tools at
// runtime, over stdio and both kinds of streamable HTTP, with an interval
// far beyond the test's life: only the server's announcement can bring
// the new definition in.
func TestCatalogFollowsToolListChanged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(t *testing.T) Config
	}{
		{"stdio", func(t *testing.T) Config { return dynStdio(t) }},
		{"http-stateful", func(t *testing.T) Config { return serveDyn(t, newDynServer(0), false) }},
		{"http-stateless", func(t *testing.T) Config { return serveDyn(t, newDynServer(0), true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCatalog(t, map[string]Config{"dyn": tc.serve(t)}, CatalogOptions{Interval: 24 * time.Hour})
			ctx, cancel := context.WithCancel(testContext(t))
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitFor(t, "the first listing", func() bool { return c.Readiness(nil).Ready })
			if tl, ok := c.Lookup("dyn", "target"); !ok || tl.Digest != dynDigest(t, 0) {
				t.Fatalf("target before the change: %+v, %v", tl, ok)
			}
			if _, ok := c.Lookup("dyn", "doomed"); !ok {
				t.Fatal("doomed not listed before the change")
			}
			first := status(t, c, "dyn").ListedAt

			cl, err := c.Client(ctx, "dyn")
			if err != nil {
				t.Fatal(err)
			}
			cn := current(cl)
			if _, err := callTool(ctx, cl, "mutate", json.RawMessage(`{"variant":1,"remove":["doomed"]}`)); err != nil {
				t.Fatal(err)
			}
			want := dynDigest(t, 1)
			waitFor(t, "the changed definition is served", func() bool {
				tl, ok := c.Lookup("dyn", "target")
				return ok && tl.Digest == want
			})
			waitFor(t, "the removed tool is gone", func() bool {
				_, ok := c.Lookup("dyn", "doomed")
				return !ok
			})
			if st := status(t, c, "dyn"); st.Err != nil || !st.ListedAt.After(first) {
				t.Errorf("status after the change: %+v (first listing at %v)", st, first)
			}
			// A reconnect would refresh the listing too, and would hide
			// announcements lost on the way.
			if current(cl) != cn {
				t.Error("the connection was replaced: the change did not come by announcement")
			}
		})
	}
}

// current returns c's connection, nil while it reconnects.
func current(c *Client) *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// TestCatalogRefreshesOnReconnect kills a stdio server whose replacement
// lists other tools: the catalog lists it again once the client has
// reconnected, without waiting for the interval, since whatever the old
// process announced is lost.
func TestCatalogRefreshesOnReconnect(t *testing.T) {
	variant := filepath.Join(t.TempDir(), "variant")
	if err := os.WriteFile(variant, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := dynStdio(t)
	cfg.Env[dynamicVariantEnv] = variant
	c := newCatalog(t, map[string]Config{"dyn": cfg}, CatalogOptions{Interval: 24 * time.Hour})
	ctx := testContext(t)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if tl, ok := c.Lookup("dyn", "target"); !ok || tl.Digest != dynDigest(t, 0) {
		t.Fatalf("target: %+v, %v", tl, ok)
	}
	cl, err := c.Client(ctx, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(ctx, cl, "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(resultText(t, res))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(variant, []byte("2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := dynDigest(t, 2)
	waitFor(t, "the replacement's definition is served", func() bool {
		tl, ok := c.Lookup("dyn", "target")
		return ok && tl.Digest == want
	})
}

// TestCatalogCoalescesToolListChanged sends a storm of announcements
// while the listing they trigger is held at the server: the catalog lists
// once for the first and once more for all the others together, and an
// announcement never makes the listing look fresher than it is.
func TestCatalogCoalescesToolListChanged(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			t.Parallel()
			d := newDynServer(0)
			cfg := serveDyn(t, d, stateless)
			var heard atomic.Int64
			c := newCatalog(t, map[string]Config{"dyn": cfg}, CatalogOptions{
				Interval: 24 * time.Hour,
				Client:   Options{ToolListChanged: func() { heard.Add(1) }},
			})
			ctx := testContext(t)
			if err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if n := d.lists.Load(); n != 1 {
				t.Fatalf("%d listings after the first refresh", n)
			}
			listed := status(t, c, "dyn").ListedAt

			d.hold()
			const storm = 20
			for i := 1; i <= storm; i++ {
				d.setVariant(i)
				// One announcement at a time, so that the SDK's own
				// debouncing does not fold them before they are sent.
				waitFor(t, fmt.Sprintf("announcement %d arrives", i), func() bool { return heard.Load() == int64(i) })
			}
			waitFor(t, "the first triggered listing reaches the server", func() bool { return d.lists.Load() == 2 })
			if tl, _ := c.Lookup("dyn", "target"); tl.Digest != dynDigest(t, 0) {
				t.Errorf("target changed before any listing answered: %s", tl.Digest)
			}
			if st := status(t, c, "dyn"); !st.ListedAt.Equal(listed) || st.Err != nil {
				t.Errorf("announcements alone changed the status: %+v, listed at %v", st, listed)
			}

			d.release()
			want := dynDigest(t, storm)
			waitFor(t, "the last variant is served", func() bool {
				tl, ok := c.Lookup("dyn", "target")
				return ok && tl.Digest == want
			})
			e, err := c.entry("dyn")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the triggered refreshes end", func() bool {
				c.mu.RLock()
				defer c.mu.RUnlock()
				return !e.changing
			})
			if n := d.lists.Load(); n != 3 {
				t.Errorf("%d announcements caused %d listings, want 2 (one in flight, one queued)", storm, n-1)
			}

			// A triggered refresh that fails keeps the last good listing
			// and its time, and records the error.
			listed = status(t, c, "dyn").ListedAt
			d.fail(true)
			d.setVariant(storm + 1)
			waitFor(t, "the failed listing is recorded", func() bool { return status(t, c, "dyn").Err != nil })
			if st := status(t, c, "dyn"); !st.ListedAt.Equal(listed) {
				t.Errorf("a failed listing moved ListedAt from %v to %v", listed, st.ListedAt)
			}
			if tl, ok := c.Lookup("dyn", "target"); !ok || tl.Digest != want {
				t.Errorf("a failed listing replaced the last good one: %+v, %v", tl, ok)
			}
		})
	}
}

// TestCatalogCloseEndsTriggeredRefresh closes the catalog while a listing
// triggered by an announcement is held at the server: Close ends it and
// returns, and later announcements start nothing.
func TestCatalogCloseEndsTriggeredRefresh(t *testing.T) {
	d := newDynServer(0)
	cfg := serveDyn(t, d, false)
	c := newCatalog(t, map[string]Config{"dyn": cfg}, CatalogOptions{Interval: 24 * time.Hour})
	if err := c.Refresh(testContext(t)); err != nil {
		t.Fatal(err)
	}
	d.hold()
	d.setVariant(1)
	waitFor(t, "the triggered listing reaches the server", func() bool { return d.lists.Load() == 2 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-testContext(t).Done():
		t.Fatal("Close waited for a held listing")
	}
	e, err := c.entry("dyn")
	if err != nil {
		t.Fatal(err)
	}
	c.listChanged(e) // as a late announcement would
	c.mu.RLock()
	changing := e.changing
	c.mu.RUnlock()
	if changing {
		t.Error("an announcement after Close started a refresh")
	}
	if tl, _ := c.Lookup("dyn", "target"); tl.Digest != dynDigest(t, 0) {
		t.Errorf("target %s after Close, want the last listing's", tl.Digest)
	}
}

// TestCloseEndsRequestsInFlight closes a client while a tool call hangs
// at the server, and while a listing is held: Close returns without
// waiting for the server, the call ends as outcome unknown, and the
// listing fails.
func TestCloseEndsRequestsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, ...string) *bank
		flags []string
	}{
		{"call/stdio", stdioBank, nil},
		{"call/http", httpBank, nil},
		// A stateful server answers the session's DELETE only when its
		// handlers have returned.
		{"call/http-stateful", httpBank, []string{"--stateful"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.start(t, append([]string{"--hang"}, tc.flags...)...)
			c := dial(t, b)
			errc := make(chan error, 1)
			go func() {
				_, err := callTool(testContext(t), c, "transfer", json.RawMessage(`{"from_account":"1102534471","to_account":"110-222-333","amount":5}`))
				errc <- err
			}()
			b.waitForCall(t, "transfer", 1)
			closeWithin(t, c)
			err := <-errc
			kinds := 0
			for _, k := range []error{ErrOutcomeUnknown, ErrInputRequired, ErrRejected, ErrUnavailable, ErrClosed} {
				if errors.Is(err, k) {
					kinds++
				}
			}
			if !errors.Is(err, ErrOutcomeUnknown) || kinds != 1 {
				t.Fatalf("err %v, want ErrOutcomeUnknown alone", err)
			}
			if b.cfg.URL != "" && !errors.Is(err, errClosedInFlight) {
				t.Errorf("err %v does not say Close ended it", err)
			}
			if n := len(b.callsTo(t, "transfer")); n != 1 {
				t.Errorf("transfer arrived %d times, want 1", n)
			}
		})
	}
	t.Run("listing", func(t *testing.T) {
		t.Parallel()
		d := newDynServer(0)
		c, err := Dial(testContext(t), "dyn", serveDyn(t, d, false), testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		d.hold()
		errc := make(chan error, 1)
		go func() {
			_, err := c.Tools(testContext(t))
			errc <- err
		}()
		waitFor(t, "the listing reaches the server", func() bool { return d.lists.Load() == 1 })
		closeWithin(t, c)
		if err := <-errc; err == nil || !errors.Is(err, errClosedInFlight) {
			t.Fatalf("listing ended with %v, want the close to end it", err)
		}
	})
}

// closeWithin closes c, failing t if Close has not returned when the
// test's context ends (an HTTP session's own Close waits for the pending
// requests, here forever).
func closeWithin(t *testing.T, c *Client) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case <-done:
	case <-testContext(t).Done():
		t.Fatal("Close waited for the request in flight")
	}
}
