package mcpgate_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/upstream"
)

// A pinned tool whose server changes its definition is withheld from the host's listing and
// refused if called by name; pinning the new definition brings it back.
func TestPinnedToolWithheldUntilRepinned(t *testing.T) {
	s := bankStack(t)
	up := startChangingServer(t)
	pinOf := func(n int) string {
		d, err := upstream.DefinitionDigest("target", "", variantSchema(n))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	policyWith := func(version, pin string) string {
		return s.policyText(t, version,
			"servers:\n", "servers:\n  dyn:\n    audience: [\"executor-test\"]\n    tools_from: {url: \""+up.url+"\"}\n",
			"tools:\n", "pins:\n  dyn:\n    tools: {target: \""+pin+"\"}\ntools:\n  dyn/target:\n    class: read\n")
	}
	writeAtomic(t, path, policyWith("pins.1", pinOf(0)))
	cfg := s.gatewayConfig(dir)
	cfg["policy"] = path
	cfg["policy_poll"] = "20ms"
	cfg["refresh_interval"] = "24h"
	changed := make(chan struct{}, 64)
	sess, log := inProcessGateway(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := ctxT(t)
	defer func() {
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(log))
		}
	}()
	listed := func() map[string]bool {
		t.Helper()
		res, err := sess.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, tl := range res.Tools {
			out[tl.Name] = true
		}
		return out
	}
	until := func(what string, cond func(map[string]bool) bool) {
		t.Helper()
		for !cond(listed()) {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("gave up waiting: %s", what)
			}
		}
	}
	until("dyn.target is listed", func(l map[string]bool) bool { return l["dyn.target"] })
	call := func() (*mcp.CallToolResult, error) {
		return sess.CallTool(ctx, &mcp.CallToolParams{Name: "dyn.target", Arguments: map[string]any{"v": 1}})
	}

	up.setVariant(1) // the server changes the tool
	until("dyn.target is withheld", func(l map[string]bool) bool { return !l["dyn.target"] && l["dyn.doomed"] })
	// The host's SDK refuses a tool no longer listed; a call that still reaches the gateway is
	// refused there.
	switch res, err := call(); {
	case err != nil && strings.Contains(err.Error(), `unknown tool "dyn.target"`):
	case err != nil:
		t.Fatal(err)
	case !res.IsError:
		t.Fatalf("a withheld tool ran: %q", text(res))
	case res.Meta[api.MetaReason] != api.GateDefinitionUnpinned:
		t.Fatalf("reason %v", res.Meta[api.MetaReason])
	}
	if !strings.Contains(readFile(log), "tool withheld by its pin") {
		t.Error("the withheld tool is not logged")
	}

	writeAtomic(t, path, policyWith("pins.2", pinOf(1))) // the operator re-pins
	until("dyn.target is back", func(l map[string]bool) bool { return l["dyn.target"] })
	if res, err := call(); err != nil || res.IsError || text(res) != "variant 1" {
		t.Fatalf("after re-pinning: %v %v", err, res)
	}
}
