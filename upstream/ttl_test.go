package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// longTTL is a cache time far beyond any test's life and any MaxAge the
// tests use.
const longTTL = time.Hour

// ttlServers are a dynServer whose listings carry ttlMs = longTTL, over
// every transport. The SDK client caches tools/list results only on
// sessions of the 2026-07-28 revision: stdio and stateless HTTP; the
// stateful HTTP session speaks an older revision and is the control.
var ttlServers = []struct {
	name    string
	caching bool // the session negotiates a revision whose client caches listings
	serve   func(t *testing.T) Config
}{
	{"stdio", true, func(t *testing.T) Config { return dynStdioTTL(t, longTTL) }},
	{"http-stateless", true, func(t *testing.T) Config { return serveDyn(t, newDynServerTTL(0, longTTL), true) }},
	{"http-stateful", false, func(t *testing.T) Config { return serveDyn(t, newDynServerTTL(0, longTTL), false) }},
}

func dynStdioTTL(t testing.TB, ttl time.Duration) Config {
	cfg := dynStdio(t)
	cfg.Env[dynamicTTLEnv] = strconv.FormatInt(ttl.Milliseconds(), 10)
	return cfg
}

// protocolVersion is the revision c's current session negotiated.
func protocolVersion(t testing.TB, c *Client) string {
	t.Helper()
	cn := current(c)
	if cn == nil {
		t.Fatal("no current connection")
	}
	return cn.sess.InitializeResult().ProtocolVersion
}

// TestToolsListsDespiteServerTTL lists a server that lets its listing be
// cached for an hour, again and again: every listing is a new tools/list
// request answered by the server, digested from the bytes it sent then.
func TestToolsListsDespiteServerTTL(t *testing.T) {
	for _, tc := range ttlServers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Dial(testContext(t), "dyn", tc.serve(t), testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if v := protocolVersion(t, c); (v >= "2026-07-28") != tc.caching {
				t.Fatalf("negotiated %s: the case does not test what it says", v)
			}
			for n := int64(1); n <= 3; n++ {
				tools, err := c.Tools(testContext(t))
				if err != nil {
					t.Fatalf("listing %d: %v", n, err)
				}
				got := map[string]string{}
				for _, tl := range tools {
					got[tl.Name] = tl.Digest
				}
				if got["serial"] != serialDigest(t, n) {
					t.Fatalf("listing %d is not the server's answer to request %d: serial %q", n, n, got["serial"])
				}
				if got["target"] != dynDigest(t, 0) {
					t.Fatalf("listing %d: target %q", n, got["target"])
				}
			}
		})
	}
}

// TestCatalogServesDespiteServerTTL refreshes a server whose listings may
// be cached for an hour, with a MaxAge far shorter: the catalog keeps
// listing it and keeps serving it long after its first listing would
// have expired.
func TestCatalogServesDespiteServerTTL(t *testing.T) {
	const maxAge = 200 * time.Millisecond
	for _, tc := range ttlServers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCatalog(t, map[string]Config{"dyn": tc.serve(t)},
				CatalogOptions{Interval: 20 * time.Millisecond, MaxAge: maxAge})
			ctx, cancel := context.WithCancel(testContext(t))
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitFor(t, "the first listing", func() bool { return c.Readiness(nil).Ready })
			first := status(t, c, "dyn").ListedAt
			var last ServerStatus
			waitFor(t, "a fresh listing after the first has expired", func() bool {
				last = status(t, c, "dyn")
				tl, ok := c.Lookup("dyn", "target")
				return last.ListedAt.After(first.Add(2*maxAge)) && ok && tl.Digest == dynDigest(t, 0)
			})
			if last.Err != nil {
				t.Errorf("status %+v", last)
			}
			if tl, ok := c.Lookup("dyn", "serial"); ok && tl.Digest == serialDigest(t, 1) {
				t.Error("the served listing is the first one")
			}
		})
	}
}

// TestCatalogToolListChangedWithinTTL changes a server's tools while its
// last listing may still be cached for an hour: the announcement brings
// the new definition in.
func TestCatalogToolListChangedWithinTTL(t *testing.T) {
	for _, tc := range ttlServers {
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
			cl, err := c.Client(ctx, "dyn")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := callTool(ctx, cl, "mutate", json.RawMessage(`{"variant":1,"remove":["doomed"]}`)); err != nil {
				t.Fatal(err)
			}
			want := dynDigest(t, 1)
			waitFor(t, "the changed definition is served", func() bool {
				tl, ok := c.Lookup("dyn", "target")
				_, doomed := c.Lookup("dyn", "doomed")
				return ok && tl.Digest == want && !doomed
			})
			// Later listings, still inside the first one's ttl, agree.
			if err := c.RefreshServer(ctx, "dyn"); err != nil {
				t.Fatal(err)
			}
			if tl, ok := c.Lookup("dyn", "target"); !ok || tl.Digest != want {
				t.Errorf("target after another refresh: %+v, %v", tl, ok)
			}
		})
	}
}

// TestCatalogReconnectWithinTTL kills a stdio server whose listing may
// be cached for an hour, and whose replacement lists another definition:
// no listing begun after the kill shows the old definition.
func TestCatalogReconnectWithinTTL(t *testing.T) {
	variant := filepath.Join(t.TempDir(), "variant")
	if err := os.WriteFile(variant, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := dynStdioTTL(t, longTTL)
	cfg.Env[dynamicVariantEnv] = variant
	c := newCatalog(t, map[string]Config{"dyn": cfg}, CatalogOptions{Interval: 24 * time.Hour})
	ctx := testContext(t)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	old := dynDigest(t, 0)
	if tl, ok := c.Lookup("dyn", "target"); !ok || tl.Digest != old {
		t.Fatalf("target: %+v, %v", tl, ok)
	}
	cl, err := c.Client(ctx, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	if v := protocolVersion(t, cl); v < "2026-07-28" {
		t.Fatalf("negotiated %s, whose client caches nothing", v)
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
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := dynDigest(t, 2)
	check := func() bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		e := c.servers["dyn"]
		tl := e.tools["target"]
		if e.listedAt.After(killed) && tl.Digest != want {
			t.Fatalf("a listing begun after the kill serves target %s (old %s)", tl.Digest, old)
		}
		return tl.Digest == want
	}
	// The refresh that follows the reconnect, and those an operator
	// forces meanwhile, all begin after the kill.
	for !check() {
		c.RefreshServer(ctx, "dyn")
		if ctx.Err() != nil {
			t.Fatal("gave up waiting for the replacement's definition")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 3 {
		if err := c.RefreshServer(ctx, "dyn"); err != nil {
			t.Fatal(err)
		}
		check()
	}
}

// TestCallAfterListingWithTTL calls, over the 2026-07-28 revision, a
// tool one of whose arguments travels in a header too (x-mcp-header):
// the SDK builds the header from the definitions it last listed, which
// it keeps although the client discards their ttl, and the server
// refuses the call without it.
func TestCallAfterListingWithTTL(t *testing.T) {
	d := newDynServerTTL(0, longTTL)
	d.srv.AddTool(&mcp.Tool{Name: "regional", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}, noopTool)
	c, err := Dial(testContext(t), "dyn", serveDyn(t, d, true), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	args := json.RawMessage(`{"region":"eu"}`)
	if _, err := callTool(testContext(t), c, "regional", args); !errors.Is(err, ErrRejected) {
		t.Fatalf("a call before any listing: %v, want the server to refuse it", err)
	}
	for range 2 {
		if _, err := c.Tools(testContext(t)); err != nil {
			t.Fatal(err)
		}
		if res, err := callTool(testContext(t), c, "regional", args); err != nil || res.IsError {
			t.Fatalf("call after a listing: %+v, %v", res, err)
		}
	}
}
