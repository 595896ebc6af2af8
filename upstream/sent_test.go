package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/conntest"
)

const transferArgsJSON = `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`

// callWays are the three ways a tools/call leaves the client: through the
// MCP library (no Definition), plainly over net/http's Transport (the
// executor's), and plainly over the gateway's own connections (PassThrough).
var callWays = []struct {
	name string
	call func(c *Client, ctx context.Context, tool string, def json.RawMessage, args string) error
}{
	{"sdk", func(c *Client, ctx context.Context, tool string, _ json.RawMessage, args string) error {
		_, _, err := c.Call(ctx, ToolCall{Tool: tool, Args: json.RawMessage(args)})
		return err
	}},
	{"plain", func(c *Client, ctx context.Context, tool string, def json.RawMessage, args string) error {
		_, _, err := c.Call(ctx, ToolCall{Tool: tool, Args: json.RawMessage(args), Definition: def})
		return err
	}},
	{"pass-through", func(c *Client, ctx context.Context, tool string, def json.RawMessage, args string) error {
		_, _, err := c.Call(ctx, ToolCall{Tool: tool, Args: json.RawMessage(args), Definition: def, PassThrough: true})
		return err
	}},
}

// definitions lists c's server and returns its definitions by name.
func definitions(t *testing.T, c *Client) map[string]json.RawMessage {
	t.Helper()
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]json.RawMessage{}
	for _, tl := range tools {
		defs[tl.Name] = tl.Raw
	}
	return defs
}

// TestCallToAKilledServerWasNeverSent: the bank is killed after a call left
// a connection kept alive; the next call finds it closed, and its new
// connection is refused. Nothing was written anywhere, so the call is
// ErrUnavailable, never ErrOutcomeUnknown.
func TestCallToAKilledServerWasNeverSent(t *testing.T) {
	for _, way := range callWays {
		t.Run(way.name, func(t *testing.T) {
			b := httpBank(t)
			c := dial(t, b)
			defs := definitions(t, c)
			if c.plain.Load() == nil || c.plainAddr == "" {
				t.Fatalf("the bank's calls are not made plainly: template %v, address %q", c.plain.Load() != nil, c.plainAddr)
			}
			if way.name == "pass-through" && plainTool("transfer", defs["transfer"]) {
				t.Fatal("transfer's definition no longer escapes a character: call it below instead of get_balance")
			}
			ctx := testContext(t)
			if err := way.call(c, ctx, "get_balance", defs["get_balance"], `{"account":"1102534471"}`); err != nil {
				t.Fatal(err)
			}
			addr := strings.TrimSuffix(strings.TrimPrefix(b.cfg.URL, "http://"), "/mcp")
			b.stop()
			// The kept connections are known closed before the call: one the
			// runtime had not yet seen closed might take the request.
			if way.name == "pass-through" {
				conntest.WaitPeerClosed(t, addr)
			} else {
				conntest.WaitDropped(t, addr)
			}
			// transfer's definition escapes a character, so a pass-through
			// call of it goes through the SDK's connections, which the wait
			// above does not cover: that way calls get_balance again, which
			// is sent on the gateway's own.
			tool, args := "transfer", transferArgsJSON
			if way.name == "pass-through" {
				tool, args = "get_balance", `{"account":"1102534471"}`
			}
			before := len(b.callsTo(t, tool))
			err := way.call(c, ctx, tool, defs[tool], args)
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("error %v, want ErrUnavailable alone: nothing was sent", err)
			}
			if n := len(b.callsTo(t, tool)) - before; n != 0 {
				t.Fatalf("the bank logged %d more calls of %s", n, tool)
			}
		})
	}
}

// TestCallLostAfterTheServerReadItIsOutcomeUnknown: a server that reads the
// call's request and closes the connection without an answer (as one that
// dies then) may have run it: the call is ErrOutcomeUnknown, whichever way
// it was sent.
func TestCallLostAfterTheServerReadItIsOutcomeUnknown(t *testing.T) {
	for _, way := range callWays {
		t.Run(way.name, func(t *testing.T) {
			b := httpBank(t)
			target, err := url.Parse(b.cfg.URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
			read := make(chan []byte, 1)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"tools/call"`)) {
					read <- body
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			c := dial(t, &bank{cfg: Config{URL: hs.URL + target.Path}})
			defs := definitions(t, c)
			err = way.call(c, testContext(t), "transfer", defs["transfer"], transferArgsJSON)
			if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("error %v, want ErrOutcomeUnknown: the server read the request", err)
			}
			if body := <-read; !bytes.Contains(body, []byte(`"amount":1000`)) {
				t.Errorf("the server read %s", body)
			}
		})
	}
}
