package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// changingServer is a real go-sdk MCP server in the test process, served
// over streamable HTTP, whose tools the test changes while the gateway is
// connected to it: "target", whose schema and answer name a variant, and
// "doomed". The SDK announces every change to its clients with
// notifications/tools/list_changed.
type changingServer struct {
	srv *mcp.Server
	url string
}

func startChangingServer(t *testing.T) *changingServer {
	t.Helper()
	c := &changingServer{srv: mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)}
	c.setVariant(0)
	c.srv.AddTool(&mcp.Tool{Name: "doomed", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "doomed"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return c.srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	c.url = hs.URL
	return c
}

func variantSchema(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"v":{"const":%d}}}`, n))
}

// schemaOf is v (a schema as a host decoded it, or raw bytes) in one
// spelling, so that the two compare.
func schemaOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(m)
	return string(b)
}

// setVariant replaces target's definition and handler.
func (c *changingServer) setVariant(n int) {
	c.srv.AddTool(&mcp.Tool{Name: "target", InputSchema: variantSchema(n)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("variant %d", n)}}}, nil
		})
}

// listingConfig is a gateway config whose own policy adds the server
// "dyn", reached at url, to the shared stack's bank, with target a read
// (forwarded) tool. refresh_interval is far beyond the test's life: only
// the server's announcement can bring a change in.
func (s *stack) listingConfig(t *testing.T, url string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	writeAtomic(t, path, s.policyText(t, "listing.1",
		"servers:\n", "servers:\n  dyn:\n    audience: [\"executor-test\"]\n    tools_from: {url: \""+url+"\"}\n",
		"tools:\n", "tools:\n  dyn/target:\n    class: read\n"))
	cfg := s.gatewayConfig(dir)
	cfg["policy"] = path
	cfg["policy_poll"] = "1h"
	cfg["refresh_interval"] = "24h"
	return cfg
}

// A host connected to the gateway sees an upstream server's new tool
// definition, and the removal of a tool, as soon as the server announces
// them, not at the next refresh_interval: the gateway's listing follows
// the catalog at once, and the gateway tells the host's session with
// notifications/tools/list_changed, for a replaced definition as for a
// removed tool.
func TestListingFollowsUpstreamAtOnce(t *testing.T) {
	s := bankStack(t)
	for _, host := range []struct {
		name    string
		connect func(t *testing.T, cfg map[string]any, opts *mcp.ClientOptions) (sess *mcp.ClientSession, log string)
	}{
		// 2026-07-28 over stateless HTTP: the announcement travels on the
		// host's subscriptions/listen stream.
		{"http", func(t *testing.T, cfg map[string]any, opts *mcp.ClientOptions) (*mcp.ClientSession, string) {
			g := startGateway(t, cfg)
			return g.connect(t, userToken, opts), g.log
		}},
		// The same in this process, where the race detector sees the
		// catalog's report reach the gateway's sync.
		{"http-in-process", inProcessGateway},
		// Over stdio an older revision hears it on the session itself, a
		// 2026-07-28 host on its subscriptions/listen stream.
		{"stdio-2025-06-18", func(t *testing.T, cfg map[string]any, opts *mcp.ClientOptions) (*mcp.ClientSession, string) {
			return stdioGateway(t, cfg, opts, "2025-06-18")
		}},
		{"stdio-2026-07-28", func(t *testing.T, cfg map[string]any, opts *mcp.ClientOptions) (*mcp.ClientSession, string) {
			return stdioGateway(t, cfg, opts, "2026-07-28")
		}},
	} {
		t.Run(host.name, func(t *testing.T) {
			up := startChangingServer(t)
			changed := make(chan struct{}, 64)
			sess, log := host.connect(t, s.listingConfig(t, up.url), &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			ctx := ctxT(t)
			defer func() {
				if t.Failed() {
					t.Logf("mcpgate log:\n%s", readFile(log))
				}
			}()
			listed := func() map[string]*mcp.Tool {
				t.Helper()
				res, err := sess.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]*mcp.Tool{}
				for _, tl := range res.Tools {
					out[tl.Name] = tl
				}
				return out
			}
			schema := func(tl *mcp.Tool) string { return schemaOf(t, tl.InputSchema) }
			// until lists again after every announcement the host
			// receives, until cond holds: a change that reached the
			// gateway without an announcement to the host never
			// satisfies it.
			until := func(what string, cond func(map[string]*mcp.Tool) bool) {
				t.Helper()
				for {
					select {
					case <-changed:
					case <-ctx.Done():
						t.Fatalf("gave up waiting: %s", what)
					}
					if cond(listed()) {
						return
					}
				}
			}

			// Over stdio the first listing may still be on its way.
			if tl := listed()["dyn.target"]; tl == nil {
				until("dyn is listed", func(l map[string]*mcp.Tool) bool { return l["dyn.target"] != nil })
			}
			first := listed()
			if got := schema(first["dyn.target"]); got != schemaOf(t, variantSchema(0)) {
				t.Fatalf("dyn.target inputSchema %s, want %s", got, variantSchema(0))
			}
			if first["dyn.doomed"] == nil || first["bank.transfer"] == nil {
				t.Fatalf("listing before the change: %v", first)
			}
			for len(changed) > 0 {
				<-changed
			}

			// The definition alone changes: the replacement is announced.
			up.setVariant(1)
			until("the new definition of dyn.target", func(l map[string]*mcp.Tool) bool {
				return l["dyn.target"] != nil && schema(l["dyn.target"]) == schemaOf(t, variantSchema(1))
			})
			if l := listed(); l["dyn.doomed"] == nil || l["bank.transfer"] == nil {
				t.Fatalf("the replacement withdrew other tools: %v", l)
			}
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "dyn.target", Arguments: map[string]any{"v": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || text(res) != "variant 1" {
				t.Fatalf("dyn.target after the change: isError=%v %q %v", res.IsError, text(res), res.Meta)
			}
			if !logged(readFile(log), "INFO", "tool definition changed upstream; exposing the new one", "tool", "dyn.target") {
				t.Error("the replaced definition is not logged")
			}

			// A tool removed upstream is withdrawn.
			up.srv.RemoveTools("doomed")
			until("dyn.doomed is withdrawn", func(l map[string]*mcp.Tool) bool { return l["dyn.doomed"] == nil })
			if l := listed(); l["dyn.target"] == nil || l["bank.transfer"] == nil {
				t.Fatalf("the removal withdrew other tools: %v", l)
			}
			res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "dyn.doomed", Arguments: map[string]any{}})
			if err == nil && !res.IsError {
				t.Errorf("a withdrawn tool ran: %s", text(res))
			}
		})
	}
}

// stdioGateway runs mcpgate serve --stdio on cfg (its listen removed), with
// the extra flags, and connects to it as a host speaking protocol revision
// version.
func stdioGateway(t *testing.T, cfg map[string]any, opts *mcp.ClientOptions, version string, extra ...string) (*mcp.ClientSession, string) {
	t.Helper()
	dir := t.TempDir()
	delete(cfg, "listen")
	cfgPath := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mcpgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command(bins["mcpgate"], append([]string{"serve", "--config", cfgPath, "--stdio"}, extra...)...)
	cmd.Stderr = logf
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "1"}, opts)
	sess, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	// Closing the session ends the gateway (its stdin closes) and waits
	// for it.
	t.Cleanup(func() { sess.Close() })
	return sess, logPath
}

// inProcessGateway runs the gateway of cfg in the test process, serving
// HTTP, and connects to it as the host of userToken. The gateway logs to
// the returned file.
func inProcessGateway(t *testing.T, raw map[string]any, opts *mcp.ClientOptions) (*mcp.ClientSession, string) {
	t.Helper()
	dir := t.TempDir()
	gw, logPath := runGateway(t, dir, raw)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return (&gateway{url: srv.URL}).connect(t, userToken, opts), logPath
}
