package upstream

import (
	"context"
	"errors"
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
	if c.Ready() {
		t.Fatal("ready before any listing")
	}
	if _, ok := c.Lookup("bank", "transfer"); ok {
		t.Fatal("lookup served before any listing")
	}
	if err := c.Refresh(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if !c.Ready() {
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
	if _, err := cl.Call(testContext(t), "get_balance", []byte(`{"account":"1102534471"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestCatalogNotReadyWhileAServerIsDown(t *testing.T) {
	s := stdioBank(t)
	c := newCatalog(t, map[string]Config{
		"bank": s.cfg,
		"gone": {URL: "http://127.0.0.1:1/mcp"},
	}, CatalogOptions{})
	if err := c.Refresh(testContext(t)); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("refresh: %v, want the unreachable server's error", err)
	}
	if c.Ready() {
		t.Error("ready with a server that never answered")
	}
	if _, ok := c.Lookup("bank", "transfer"); !ok {
		t.Error("a healthy server's tools are not served")
	}
	for _, st := range c.Status() {
		if (st.ID == "gone") != (st.Err != nil) || (st.ID == "bank") != st.Listed {
			t.Errorf("status %+v", st)
		}
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
	if !c.Ready() {
		t.Error("readiness lost: it means the server has answered once")
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
				c.Ready()
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
	for !c.Ready() {
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
