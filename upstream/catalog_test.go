package upstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newCatalog(t *testing.T, servers map[string]Config, opts CatalogOptions) *Catalog {
	t.Helper()
	hook := opts.Client.ToolListChanged
	opts.Client = testOptions(t)
	opts.Client.ToolListChanged = hook
	c, err := NewCatalog(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCatalogReadiness(t *testing.T) {
	s, h := stdioBank(t), httpBank(t)
	c := newCatalog(t, map[string]Config{"bank": s.cfg, "bank-http": h.cfg}, CatalogOptions{})
	if c.Readiness(nil).Ready {
		t.Fatal("ready before any listing")
	}
	if _, ok := c.Lookup("bank", "transfer"); ok {
		t.Fatal("lookup served before any listing")
	}
	if err := c.Refresh(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if !c.Readiness(nil).Ready {
		t.Fatalf("not ready after a successful refresh: %+v", c.Status())
	}
	a, ok1 := c.Lookup("bank", "transfer")
	b, ok2 := c.Lookup("bank-http", "transfer")
	if !ok1 || !ok2 || a.Digest == "" || a.Digest != b.Digest || a.Server != "bank" || b.Server != "bank-http" {
		t.Fatalf("lookup: %v %+v / %v %+v", ok1, a, ok2, b)
	}
	if _, ok := c.Lookup("bank", "no_such_tool"); ok {
		t.Error("unknown tool found")
	}
	if _, ok := c.Lookup("nowhere", "transfer"); ok {
		t.Error("unknown server found")
	}
	if tools, ok := c.Tools("bank"); !ok || len(tools) != 4 {
		t.Errorf("tools: %d, %v", len(tools), ok)
	}
	// The catalog's clients are the ones callers execute through.
	cl, err := c.Client(testContext(t), "bank")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(testContext(t), cl, "get_balance", []byte(`{"account":"1102534471"}`)); err != nil {
		t.Fatal(err)
	}
}

// TestCatalogReadyWhileAnotherServerIsListed: a server that cannot be listed
// holds readiness back only while it is the last one: replicas share their
// servers, so routing away from each of them would stop the calls to the
// others too. It is named among the unlisted all the same.
func TestCatalogReadyWhileAnotherServerIsListed(t *testing.T) {
	s := stdioBank(t)
	c := newCatalog(t, map[string]Config{
		"bank": s.cfg,
		"gone": {URL: "http://127.0.0.1:1/mcp?api_key=SECRET"},
	}, CatalogOptions{})
	if r := c.Readiness(nil); r.Ready || !r.Starting || len(r.Problems) != 2 {
		t.Fatalf("readiness before the first refresh: %+v", r)
	}
	if err := c.Refresh(testContext(t)); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("refresh: %v, want the unreachable server's error", err)
	}
	if r := c.Readiness(nil); !r.Ready || r.Starting || !slices.Equal(r.Unlisted, []string{"gone"}) {
		t.Errorf("readiness with one of two servers listed: %+v", r)
	}
	if _, ok := c.Lookup("bank", "transfer"); !ok {
		t.Error("a healthy server's tools are not served")
	}
	for _, st := range c.Status() {
		if (st.ID == "gone") != (st.Err != nil) || (st.ID == "bank") != st.Listed || (st.ID == "bank") != st.Served || !st.Tried {
			t.Errorf("status %+v", st)
		}
	}
	// Over the unreachable server alone (as a gateway whose policy names
	// only it), nothing can be listed: not ready, and the reason names the
	// server and nothing of its address.
	r := c.Readiness(func(id string) bool { return id == "gone" })
	if r.Ready || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "server gone has never answered tools/list") {
		t.Fatalf("readiness over the unreachable server: %+v", r)
	}
	if strings.Contains(r.Problems[0], "SECRET") || strings.Contains(r.Problems[0], "127.0.0.1") {
		t.Errorf("the reason quotes the server's address: %q", r.Problems[0])
	}
}

// TestCatalogReadinessFollowsTheServer: a listed server that dies keeps the
// catalog ready while its last listing is served (MaxAge), and not past
// it; it is ready again once the server lists again. The clock is the
// catalog's own, so the grace is crossed without waiting for it.
func TestCatalogReadinessFollowsTheServer(t *testing.T) {
	h := httpBank(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// A refresh of the dead server waits for a reconnect until Timeout.
	c := newCatalog(t, map[string]Config{"bank": h.cfg}, CatalogOptions{Interval: time.Minute, Timeout: time.Second, Now: clock})
	ctx := testContext(t)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if r := c.Readiness(nil); !r.Ready || len(r.Unlisted) != 0 {
		t.Fatalf("readiness after a listing: %+v", r)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(h.cfg.URL, "http://"), "/mcp")
	h.stop()
	for _, step := range []struct {
		after time.Duration
		ready bool
	}{
		{time.Minute, true},       // one failed refresh
		{time.Minute, true},       // two
		{time.Minute, true},       // three: the listing is exactly MaxAge old
		{time.Second, false},      // past it
		{10 * time.Minute, false}, // and it stays so
	} {
		advance(step.after)
		if err := c.Refresh(ctx); err == nil {
			t.Fatal("a killed server was listed")
		}
		r := c.Readiness(nil)
		if r.Ready != step.ready {
			t.Fatalf("%s after the last listing: %+v", now.Sub(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), r)
		}
		if _, ok := c.Lookup("bank", "transfer"); ok != step.ready {
			t.Fatalf("the listing is served: %v, ready: %v", ok, step.ready)
		}
		if !r.Ready && (len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "server bank has not answered tools/list for 3m1s (a listing is served for 3m0s") &&
			!strings.Contains(r.Problems[0], "for 13m1s")) {
			t.Errorf("reason: %q", r.Problems)
		}
	}
	h.start(t, addr)
	// The client reconnects on its own backoff; a refresh before that
	// fails, so refresh until one lists.
	for err := c.RefreshServer(ctx, "bank"); err != nil; err = c.RefreshServer(ctx, "bank") {
		if ctx.Err() != nil {
			t.Fatalf("the restarted server is never listed: %v", err)
		}
	}
	if r := c.Readiness(nil); !r.Ready || len(r.Problems) != 0 || len(r.Unlisted) != 0 {
		t.Errorf("readiness once the server is back: %+v", r)
	}
}

func TestCatalogReflectsChanges(t *testing.T) {
	h := httpBank(t)
	c := newCatalog(t, map[string]Config{"bank": h.cfg}, CatalogOptions{MaxAge: -1})
	ctx := testContext(t)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Lookup("bank", "transfer")

	// Restart the server on the same address with a changed transfer
	// definition and without schedule_transfer.
	addr := strings.TrimSuffix(strings.TrimPrefix(h.cfg.URL, "http://"), "/mcp")
	h.stop()
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("refresh of a stopped server succeeded")
	}
	if got, ok := c.Lookup("bank", "transfer"); !ok || got.Digest != before.Digest {
		t.Error("the last good listing is not served while the server is down")
	}
	h.start(t, addr, "--schema-variant", "1", "--hide", "schedule_transfer")
	if err := c.RefreshServer(ctx, "bank"); err != nil {
		// The first request may meet the stale connection; the next one
		// runs on the replacement.
		if err := c.RefreshServer(ctx, "bank"); err != nil {
			t.Fatal(err)
		}
	}
	after, ok := c.Lookup("bank", "transfer")
	if !ok || after.Digest == before.Digest {
		t.Errorf("changed definition not reflected: %q -> %q", before.Digest, after.Digest)
	}
	if _, ok := c.Lookup("bank", "schedule_transfer"); ok {
		t.Error("withdrawn tool still listed")
	}
}

func TestCatalogStaleListingExpires(t *testing.T) {
	h := httpBank(t)
	c := newCatalog(t, map[string]Config{"bank": h.cfg}, CatalogOptions{MaxAge: 1})
	if err := c.Refresh(testContext(t)); err != nil {
		t.Fatal(err)
	}
	h.stop()
	c.Refresh(testContext(t))
	// A listing is older than 1ns by the time anyone reads it.
	if _, ok := c.Lookup("bank", "transfer"); ok {
		t.Error("expired listing served")
	}
	if c.Readiness(nil).Ready {
		t.Error("ready with its only server's listing expired")
	}
}

func TestCatalogConcurrentUse(t *testing.T) {
	s := stdioBank(t)
	c := newCatalog(t, map[string]Config{"bank": s.cfg}, CatalogOptions{})
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if err := c.Refresh(ctx); err != nil {
					t.Error(err)
					return
				}
				c.Lookup("bank", "transfer")
				c.Readiness(nil)
			}
		})
	}
	wg.Wait()
	c.Close()
	if err := c.Refresh(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("refresh after Close: %v", err)
	}
}

func TestCatalogRun(t *testing.T) {
	s := stdioBank(t)
	c := newCatalog(t, map[string]Config{"bank": s.cfg}, CatalogOptions{})
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// Run refreshes at once.
	for !c.Readiness(nil).Ready {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-ctx.Done():
			t.Fatal("Run never refreshed")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

func TestNewCatalogRejectsBadConfig(t *testing.T) {
	for name, servers := range map[string]map[string]Config{
		"empty id":     {"": {URL: "http://127.0.0.1:1/mcp"}},
		"both":         {"x": {URL: "http://127.0.0.1:1/mcp", Command: []string{"bank"}}},
		"neither":      {"x": {}},
		"bad scheme":   {"x": {URL: "file:///etc/passwd"}},
		"reserved hdr": {"x": {URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"mcp-session-id": "x"}}},
		"env on url":   {"x": {URL: "http://127.0.0.1:1/mcp", Env: map[string]string{"A": "b"}}},
		"hdr on stdio": {"x": {Command: []string{"bank"}, Headers: map[string]string{"Authorization": "x"}}},
	} {
		if _, err := NewCatalog(servers, CatalogOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
