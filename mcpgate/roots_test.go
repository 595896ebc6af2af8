package mcpgate_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rootsServer is an upstream MCP server of a revision before 2026-07-28,
// in sessions, whose tool roots answers with the URIs of its client's
// roots (roots/list, asked during the call) in order, and which sends changed a
// value whenever its client says its roots changed.
func rootsServer(t *testing.T, changed chan<- struct{}) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	srv.AddTool(&mcp.Tool{Name: "roots", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		slices.Sort(uris)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots: " + strings.Join(uris, " ")}}}, nil
	})
	return olderHTTP(t, srv, false)
}

// TestRootsAreTheSessionsOwn: a host in a session that declared roots has
// them at its own connection to an older server: the server's roots/list
// gets the host's list, and when the host's roots change the server is
// told so and gets the new list. Another user's host, with roots of its
// own, never has them seen by the server through the first host's
// connection, nor the other way round. A host that declared no roots
// gives the server none (its connection declares none, and a server that
// asks all the same is told of no root).
func TestRootsAreTheSessionsOwn(t *testing.T) {
	changed := make(chan struct{}, 1)
	g := withServers(t, bankStack(t), serverEntry("files", rootsServer(t, changed)), "  files/roots: {class: read}\n", nil)
	host := func(token string, roots ...string) (*mcp.Client, *mcp.ClientSession) {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "roots-host", Version: "1"}, nil)
		for _, r := range roots {
			c.AddRoots(&mcp.Root{URI: r})
		}
		sess, err := g.connectWith(t, "/mcp/files", token, "2025-11-25", c)
		if err != nil {
			t.Fatal(err)
		}
		return c, sess
	}
	call := func(sess *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	alice, as := host(userToken, "file:///home/alice/project")
	_, bs := host(otherToken, "file:///home/bob/secrets")
	if got := text(call(as)); got != "roots: file:///home/alice/project" {
		t.Errorf("alice's call: %q", got)
	}
	if got := text(call(bs)); got != "roots: file:///home/bob/secrets" {
		t.Errorf("bob's call: %q", got)
	}

	// One change of the host's: one notification to the gateway, which asks
	// the host for its list, sets it at alice's connection and then tells
	// the server.
	alice.AddRoots(&mcp.Root{URI: "file:///home/alice/other"})
	select {
	case <-changed:
	case <-ctxT(t).Done():
		t.Fatal("the server was not told that alice's roots changed")
	}
	if got := text(call(as)); got != "roots: file:///home/alice/other file:///home/alice/project" {
		t.Errorf("alice's call after her roots changed: %q", got)
	}
	if got := text(call(bs)); got != "roots: file:///home/bob/secrets" {
		t.Errorf("bob's call after alice's roots changed: %q", got)
	}

	carol := mcp.NewClient(&mcp.Implementation{Name: "no-roots-host", Version: "1"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := g.connectWith(t, "/mcp/files", userToken, "2025-11-25", carol)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(cs); res.IsError != (text(res) != "roots: ") || strings.Contains(text(res), "file://") {
		t.Errorf("a host without roots: %+v %q", res, text(res))
	}
}
