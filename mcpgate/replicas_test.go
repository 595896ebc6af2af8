package mcpgate_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// Two gateway replicas behind one etcd, with the same state key: a 2026-07-28 host asked by
// replica A answers through replica B (and the next round through A again), the call executes
// exactly once, and the requestState already used is refused request_state_replayed on either.
func TestTwoReplicasShareContinuationsOnEtcd(t *testing.T) {
	s := bankStack(t)
	endpoint := etcdtest.Start(t)
	dir := t.TempDir() // one state key file for both
	replica := func() *gateway {
		cfg := s.gatewayConfig(dir)
		cfg["state"] = map[string]any{"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/replicas-test/"}
		return startGateway(t, cfg)
	}
	a, b := replica(), replica()
	hosts := []*mcp.ClientSession{a.connect(t, userToken, manualMRTR), b.connect(t, userToken, manualMRTR)}
	ctx := ctxT(t)
	mark := s.mark(t)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}

	params := &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()}
	var used []string
	var res *mcp.CallToolResult
	for round := 0; ; round++ {
		var err error
		if res, err = hosts[round%2].CallTool(ctx, params); err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() {
			break
		}
		if round > 8 {
			t.Fatal("still asking after 8 rounds")
		}
		form, ok := res.InputRequests["answers"].(*mcp.ElicitParams)
		if !ok {
			t.Fatalf("round %d: input requests %v", round, res.InputRequests)
		}
		answer, err := u.answer(ctx, &mcp.ElicitRequest{Params: form})
		if err != nil {
			t.Fatal(err)
		}
		used = append(used, res.RequestState)
		params = &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(), RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"answers": answer}}
	}
	if res.IsError {
		t.Fatalf("call failed: %s %v", text(res), res.Meta)
	}
	if len(used) < 2 {
		t.Fatalf("%d rounds: want at least one answered on each replica", len(used))
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 1 {
		t.Fatalf("bank saw %d transfers, want exactly 1", n)
	}
	for i, st := range used {
		for r, host := range hosts {
			res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(), RequestState: st,
				InputResponses: mcp.InputResponseMap{"answers": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || reason(res) != "request_state_replayed" {
				t.Errorf("state %d replayed on replica %d: %q %s, want request_state_replayed", i, r, reason(res), text(res))
			}
		}
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 1 {
		t.Fatalf("bank saw %d transfers after the replays, want exactly 1", n)
	}
}

// With its etcd gone, a replica refuses a gated call state_unavailable: nothing is asked
// that could not be answered, and nothing passes.
func TestReplicaWithoutEtcdRefuses(t *testing.T) {
	s := bankStack(t)
	srv := etcdtest.NewServer(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["state"] = map[string]any{"kind": "etcd", "endpoints": []string{srv.Endpoint}, "request_timeout": "500ms"}
	g := startGateway(t, cfg)
	host := g.connect(t, userToken, manualMRTR)
	ctx := ctxT(t)
	first, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("with etcd up: %v %s", err, text(first))
	}
	mark := s.mark(t)
	srv.Freeze()
	defer srv.Thaw()
	res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || reason(res) != "state_unavailable" {
		t.Errorf("first round with etcd frozen: %q %s, want state_unavailable", reason(res), text(res))
	}
	res, err = host.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(), RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"answers": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || reason(res) != "state_unavailable" {
		t.Errorf("answer with etcd frozen: %q %s, want state_unavailable", reason(res), text(res))
	}
	resp, err := http.Get(g.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "state store") {
		t.Errorf("/readyz with the state store's etcd frozen: %d %s", resp.StatusCode, body)
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Fatalf("bank saw %d transfers", n)
	}
}
