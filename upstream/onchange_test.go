package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stableServer is a real go-sdk MCP server whose listing changes only
// when a test changes it, unlike dynServer, whose every listing differs.
// It starts with "target" (schema of variant 0) and "doomed"; the SDK
// announces every AddTool and RemoveTools to connected clients.
type stableServer struct {
	srv     *mcp.Server
	lists   atomic.Int64 // tools/list requests received
	failing atomic.Bool  // tools/list answers with a JSON-RPC error
}

func newStableServer() *stableServer {
	s := &stableServer{srv: mcp.NewServer(&mcp.Implementation{Name: "stable", Version: "1"}, nil)}
	s.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == methodListTools {
				s.lists.Add(1)
				if s.failing.Load() {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "listing unavailable"}
				}
			}
			return next(ctx, method, req)
		}
	})
	s.srv.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(0)}, noopTool)
	s.srv.AddTool(&mcp.Tool{Name: "doomed", InputSchema: json.RawMessage(`{"type":"object"}`)}, noopTool)
	return s
}

// serve serves s over streamable HTTP in this process (see serveDyn for
// what stateless changes).
func (s *stableServer) serve(t testing.TB, stateless bool) Config {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(hs.Close)
	return Config{URL: hs.URL}
}

// changeLog records OnChange calls, with target's digest as the catalog
// served it during each call.
type changeLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (l *changeLog) add(server, digest string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]string{}
	}
	l.seen[server] = append(l.seen[server], digest)
}

func (l *changeLog) count(server string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen[server])
}

func (l *changeLog) last(server string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seen[server]
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// onChangeCatalog is a catalog over servers whose OnChange records into
// log, reading the catalog as it does: were OnChange called under the
// catalog's lock, that read would deadlock.
func onChangeCatalog(t *testing.T, servers map[string]Config, log *changeLog, opts CatalogOptions) *Catalog {
	t.Helper()
	var c *Catalog
	opts.OnChange = func(server string) {
		tl, _ := c.Lookup(server, "target")
		log.add(server, tl.Digest)
	}
	c = newCatalog(t, servers, opts)
	return c
}

// settled waits until the refresh that s's last announcement started
// (if any) has ended, OnChange included: the server has seen a listing
// after before, and no triggered refresh runs.
func settled(t *testing.T, c *Catalog, id string, s *stableServer, before int64) {
	t.Helper()
	e, err := c.entry(id)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the triggered refresh ends", func() bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return s.lists.Load() > before && !e.changing
	})
}

// TestCatalogOnChange changes a real server's tools one way at a time,
// with another server that never changes beside it: OnChange reports
// each real change once, for the right server, with the new listing
// already served, and stays silent for refreshes (periodic, explicit or
// announced) that list the same definitions and for failed ones.
func TestCatalogOnChange(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			t.Parallel()
			a, b := newStableServer(), newStableServer()
			log := &changeLog{}
			// The interval matters only while Run runs, below; the
			// listings never expire, which would be a change of its own.
			c := onChangeCatalog(t, map[string]Config{"a": a.serve(t, stateless), "b": b.serve(t, stateless)},
				log, CatalogOptions{Interval: time.Millisecond, MaxAge: -1})
			ctx := testContext(t)
			counts := func(t *testing.T, wantA, wantB int) {
				t.Helper()
				if na, nb := log.count("a"), log.count("b"); na != wantA || nb != wantB {
					t.Fatalf("OnChange called %d times for a and %d for b, want %d and %d", na, nb, wantA, wantB)
				}
			}

			// The first listing is a change: nothing was served before.
			// OnChange has run by the time Refresh returns.
			if err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			counts(t, 1, 1)
			if got := log.last("a"); got != dynDigest(t, 0) {
				t.Fatalf("OnChange saw target %q, want the first listing's", got)
			}
			if err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			counts(t, 1, 1)

			// Periodic refreshes of the same listings.
			la, lb := a.lists.Load(), b.lists.Load()
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.Run(runCtx) }()
			waitFor(t, "several periodic refreshes", func() bool { return a.lists.Load() > la+3 && b.lists.Load() > lb+3 })
			cancel()
			<-done
			counts(t, 1, 1)

			n := 1
			for _, step := range []struct {
				name   string
				change func(*mcp.Server)
				report bool
				served func() bool
			}{
				{name: "schema changed", report: true,
					change: func(s *mcp.Server) { s.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(1)}, noopTool) },
					served: func() bool { tl, ok := c.Lookup("a", "target"); return ok && tl.Digest == dynDigest(t, 1) }},
				// The SDK announces every AddTool, even of the same
				// definition: the listing it triggers changes nothing.
				{name: "same definition added again", report: false,
					change: func(s *mcp.Server) { s.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(1)}, noopTool) },
					served: func() bool { tl, ok := c.Lookup("a", "target"); return ok && tl.Digest == dynDigest(t, 1) }},
				{name: "tool added", report: true,
					change: func(s *mcp.Server) {
						s.AddTool(&mcp.Tool{Name: "extra", InputSchema: json.RawMessage(`{"type":"object"}`)}, noopTool)
					},
					served: func() bool { _, ok := c.Lookup("a", "extra"); return ok }},
				// Not in the digest, but in what a re-exposing user
				// shows: reported too.
				{name: "annotations changed", report: true,
					change: func(s *mcp.Server) {
						s.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(1),
							Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, noopTool)
					},
					served: func() bool { tl, ok := c.Lookup("a", "target"); return ok && len(tl.Annotations) > 0 }},
				{name: "tool removed", report: true,
					change: func(s *mcp.Server) { s.RemoveTools("doomed") },
					served: func() bool { _, ok := c.Lookup("a", "doomed"); return !ok }},
			} {
				t.Run(step.name, func(t *testing.T) {
					before := a.lists.Load()
					step.change(a.srv)
					if step.report {
						n++
						waitFor(t, "OnChange reports the change", func() bool { return log.count("a") == n })
					}
					settled(t, c, "a", a, before)
					counts(t, n, 1)
					if !step.served() {
						t.Fatal("the catalog does not serve the change")
					}
					// Listing again finds nothing new.
					if err := c.Refresh(ctx); err != nil {
						t.Fatal(err)
					}
					counts(t, n, 1)
				})
			}
			if got := log.last("a"); got != dynDigest(t, 1) {
				t.Errorf("OnChange saw target %q, want variant 1's", got)
			}

			// A failed refresh reports nothing, whether an announcement
			// or a caller started it, and the last good listing stays.
			a.failing.Store(true)
			before := a.lists.Load()
			a.srv.AddTool(&mcp.Tool{Name: "target", InputSchema: dynSchema(2)}, noopTool)
			settled(t, c, "a", a, before)
			if err := c.RefreshServer(ctx, "a"); err == nil {
				t.Fatal("a failing listing refreshed")
			}
			if st := status(t, c, "a"); st.Err == nil {
				t.Errorf("status %+v, want the listing's error", st)
			}
			counts(t, n, 1)
			if tl, ok := c.Lookup("a", "target"); !ok || tl.Digest != dynDigest(t, 1) {
				t.Errorf("target after failed refreshes: %+v, %v; want the last good listing", tl, ok)
			}
			// The change made meanwhile shows at the next good listing.
			a.failing.Store(false)
			if err := c.RefreshServer(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			counts(t, n+1, 1)
			if got := log.last("a"); got != dynDigest(t, 2) {
				t.Errorf("OnChange saw target %q, want variant 2's", got)
			}
		})
	}
}

// TestCatalogOnChangeAfterExpiry lists an unchanged server again after
// its listing has expired: Tools served nothing meanwhile, so the same
// definitions coming back are a change to whoever re-exposes them.
func TestCatalogOnChangeAfterExpiry(t *testing.T) {
	s := newStableServer()
	log := &changeLog{}
	c := onChangeCatalog(t, map[string]Config{"s": s.serve(t, false)}, log, CatalogOptions{MaxAge: time.Nanosecond})
	ctx := testContext(t)
	for i := 1; i <= 2; i++ {
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := log.count("s"); n != i {
			t.Fatalf("after refresh %d OnChange was called %d times, want %d", i, n, i)
		}
		if _, ok := c.Tools("s"); ok {
			t.Fatal("a listing older than MaxAge is served")
		}
	}
}
