package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect runs serve on one end of a pair of pipes and a go-sdk client on the other.
func connect(t *testing.T, serve func(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := serve(ctx, toServer, fromServer)
		fromServer.Close()
		served <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, io.ErrClosedPipe) && !strings.Contains(err.Error(), "closed") {
				t.Errorf("server: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("server did not end when the client closed its side")
		}
	})
	return cs
}

var servers = []struct {
	name  string
	serve func(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error
}{
	{"minimal", func(_ context.Context, r io.ReadCloser, w io.WriteCloser) error { return serveMinimal(r, w) }},
	{"sdk", func(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
		return newSDKServer().Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
	}},
}

// TestGoSDKClient drives both server modes with the go-sdk client the executor uses, and checks
// that they answer alike.
func TestGoSDKClient(t *testing.T) {
	argsList := []map[string]any{
		{"account": "1102534471"},
		{"account": "quote \" backslash \\ newline \n tab \t nul \u0000 html <&> sep \u2028 hangul 한"},
	}
	texts := map[string][]string{}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			cs := connect(t, s.serve, "")
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" || tools.Tools[0].Description != "Return the arguments unchanged." {
				t.Fatalf("tools/list: %+v", tools.Tools)
			}
			gotSchema, err := json.Marshal(tools.Tools[0].InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			json.Unmarshal([]byte(schema), &want)
			json.Unmarshal(gotSchema, &got)
			if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
				t.Errorf("schema = %s, want %s", g, w)
			}
			for _, args := range argsList {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
				if err != nil {
					t.Fatalf("tools/call: %v", err)
				}
				if res.IsError || len(res.Content) != 1 {
					t.Fatalf("tools/call result: %+v", res)
				}
				text, ok := res.Content[0].(*mcp.TextContent)
				if !ok {
					t.Fatalf("content %T, want text", res.Content[0])
				}
				var echoed map[string]any
				if err := json.Unmarshal([]byte(text.Text), &echoed); err != nil {
					t.Fatalf("echoed text %q is not JSON: %v", text.Text, err)
				}
				if g, w := mustJSON(t, echoed), mustJSON(t, args); g != w {
					t.Errorf("echoed %s, want %s", g, w)
				}
				texts[s.name] = append(texts[s.name], text.Text)
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != -32602 {
				t.Errorf("unknown tool: err = %v, want JSON-RPC error -32602", err)
			}
		})
	}
	if g, w := texts["minimal"], texts["sdk"]; strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("echoed texts differ:\nminimal %q\nsdk     %q", g, w)
	}
}

// TestGoSDKClientVersions checks the version the minimal server settles on with the go-sdk client.
func TestGoSDKClientVersions(t *testing.T) {
	for _, tc := range []struct{ asked, want string }{
		{"", "2025-11-25"}, // the client's default: server/discover fails, initialize 2025-11-25
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"2024-11-05", "2024-11-05"},
	} {
		t.Run("asked="+tc.asked, func(t *testing.T) {
			cs := connect(t, servers[0].serve, tc.asked)
			res := cs.InitializeResult()
			if res.ProtocolVersion != tc.want {
				t.Errorf("protocol version %q, want %q", res.ProtocolVersion, tc.want)
			}
			if res.Capabilities == nil || res.Capabilities.Tools == nil || res.ServerInfo == nil || res.ServerInfo.Name != "echo" {
				t.Errorf("initialize result %+v", res)
			}
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"account": "1"}}); err != nil {
				t.Errorf("tools/call: %v", err)
			}
		})
	}
}

// TestMinimalWire checks the minimal server's answers byte for byte.
func TestMinimalWire(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	for _, tc := range []struct {
		name, in, want string
	}{
		{"initialize known version",
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-06-18","serverInfo":{"name":"echo","version":"1.0.0"}}}`},
		{"initialize unknown version",
			`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"1999-01-01"}}`,
			`{"jsonrpc":"2.0","id":"a","result":{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"echo","version":"1.0.0"}}}`},
		{"initialize 2026-07-28 answers at most 2025-11-25",
			`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"echo","version":"1.0.0"}}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`, ``},
		{"response is ignored", `{"jsonrpc":"2.0","id":7,"result":{}}`, ``},
		{"blank line", "  \r", ``},
		{"ping", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"tools/list", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`, `{"jsonrpc":"2.0","id":4,"result":` + toolsListResult + `}`},
		{"tools/call",
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"account":"1102534471"}}}`,
			`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"account\":\"1102534471\"}"}]}}`},
		{"tools/call long",
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"account":"` + long + `"}}}`,
			`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"account\":\"` + long + `\"}"}]}}`},
		{"tools/call without arguments",
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo"}}`,
			`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":""}]}}`},
		{"unknown tool",
			`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"unknown tool \"nope\""}}`},
		{"bad params",
			`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":1}}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"invalid params: json: cannot unmarshal number into Go struct field callParams.name of type string"}}`},
		{"unknown method",
			`{"jsonrpc":"2.0","id":8,"method":"server/discover","params":{}}`,
			`{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"method not found: \"server/discover\""}}`},
		{"parse error", `{"jsonrpc":"2.0","id":9,`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{"wrong version", `{"jsonrpc":"1.0","id":9,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case also runs with and without a final newline, and after a ping to check that
			// the reused buffers carry nothing over.
			for _, in := range []string{tc.in, tc.in + "\n", `{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"echo","arguments":{"old":true}}}` + "\n" + tc.in + "\n"} {
				var out bytes.Buffer
				if err := serveMinimal(strings.NewReader(in), &out); err != nil {
					t.Fatal(err)
				}
				got, _ := strings.CutPrefix(out.String(), `{"jsonrpc":"2.0","id":0,"result":{"content":[{"type":"text","text":"{\"old\":true}"}]}}`+"\n")
				want := tc.want
				if want != "" {
					want += "\n"
				}
				if got != want {
					t.Errorf("in %.200q:\n got %.300q\nwant %.300q", in, got, want)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
