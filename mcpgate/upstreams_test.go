package mcpgate_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// questionServer is a server of revision 2025-11-25 whose tool ask puts a
// question to the caller with elicitation/create once every call of a round
// is in flight, and answers with what it was told.
func questionServer(t *testing.T, calls int) string {
	t.Helper()
	var mu sync.Mutex
	entered := 0
	all := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		if entered++; entered == calls {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "What is your name?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not asked: " + err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + res.Content["name"].(string)}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestTwoHostsAskedAtOnce: two users' hosts call a pass-through tool of a
// stateful server at the same time, and the server asks each a question
// during the call: each host is asked its own question and its own answer
// comes back, over a connection of its session's own. Over one shared
// connection the questions could not be told apart, and one would be
// refused.
func TestTwoHostsAskedAtOnce(t *testing.T) {
	s := bankStack(t)
	url := questionServer(t, 2)
	g := withServers(t, s, serverEntry("asker", url), "  asker/ask:\n    class: read\n", nil)

	type outcome struct {
		text  string
		forms []string
	}
	results := make(chan outcome, 2)
	var wg sync.WaitGroup
	for _, host := range []struct{ token, name string }{{userToken, "Ann"}, {otherToken, "Bo"}} {
		u := &user{values: map[string]any{"name": host.name}}
		sess, err := g.connectAt(t, "/mcp/asker", host.token, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: u.answer})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
			o := outcome{forms: u.shown()}
			switch {
			case err != nil:
				o.text = "error: " + err.Error()
			case res.IsError:
				o.text = "tool error: " + text(res)
			default:
				o.text = text(res)
			}
			results <- o
		})
	}
	wg.Wait()
	close(results)
	got := map[string]outcome{}
	for o := range results {
		got[o.text] = o
	}
	for _, name := range []string{"Ann", "Bo"} {
		o, ok := got["hello "+name]
		if !ok {
			t.Fatalf("%s's call did not come back with %s's answer: %+v", name, name, got)
		}
		if len(o.forms) != 1 {
			t.Errorf("%s's host was asked %d questions, want its own one: %v", name, len(o.forms), o.forms)
		}
	}
}

// TestUpstreamSessionsPerPrincipal: with max_upstream_sessions_per_principal
// 1, a principal's first session calling an older server in sessions gets a
// connection of its own, its second session's call takes the shared
// connection (and still runs), and another principal's session gets one of
// its own; a session that ends gives its principal's share back.
func TestUpstreamSessionsPerPrincipal(t *testing.T) {
	g := withServers(t, bankStack(t), serverEntry("chatsess", chattyServer(t, false)), "  chatsess/chatty: {class: read}\n",
		func(raw map[string]any) { raw["max_upstream_sessions_per_principal"] = 1 })
	call := func(token, who string) *mcp.ClientSession {
		t.Helper()
		sess, err := g.connectAs(t, token, "2025-11-25", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "chatsess.chatty", Arguments: map[string]any{"who": who, "together": 1}})
		if err != nil || res.IsError || text(res) != "done for "+who {
			t.Fatalf("%s: %v %+v", who, err, res)
		}
		return sess
	}
	open := func() float64 { return sample(t, g.url, "mcpgate_upstream_sessions") }

	first := call(userToken, "alice-1")
	if n := open(); n != 1 {
		t.Fatalf("after alice's first session: %v connections of host sessions, want 1", n)
	}
	call(userToken, "alice-2")
	if n := open(); n != 1 {
		t.Fatalf("after alice's second session: %v connections of host sessions, want 1 (her share is 1)", n)
	}
	call(otherToken, "bob")
	if n := open(); n != 2 {
		t.Fatalf("after bob's session: %v connections of host sessions, want 2", n)
	}
	// The first session ends: its connection closes (the gateway sees the
	// session end), and alice's next session gets a connection of its own.
	first.Close()
	for open() != 1 {
		select {
		case <-ctxT(t).Done():
			t.Fatal("alice's first session ended, and its connection stayed open")
		case <-time.After(20 * time.Millisecond):
		}
	}
	call(userToken, "alice-3")
	if n := open(); n != 2 {
		t.Fatalf("after alice's third session: %v connections of host sessions, want 2", n)
	}
}
