package mcpgate_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/mcpgate"
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
// that could not be answered, and nothing passes. The first round's refusal is the rate
// limit's, whose bucket is in etcd too: a bucket that cannot be read lets no call through.
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

// relayReplicas runs two gateways of relayConfig in the test process on one etcd (a state
// section of kind etcd, plus the keys of extra) with one state key, and returns a 2026-07-28
// host of the user's on each.
func relayReplicas(t *testing.T, endpoint string, extra map[string]any) []*mcp.ClientSession {
	t.Helper()
	raw, _, _ := relayConfig(t)
	state := map[string]any{"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/relay-replicas/"}
	maps.Copy(state, extra)
	raw["state"] = state
	noMRTR := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	var hosts []*mcp.ClientSession
	for range 2 {
		gw, _ := runGateway(t, t.TempDir(), raw)
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		sess, err := (&gateway{url: srv.URL}).connectAs(t, userToken, "2026-07-28", noMRTR)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, sess)
	}
	return hosts
}

// askSurvey calls ask.survey on host and returns the relayed question's requestState, or the
// refusal.
func askSurvey(t *testing.T, host *mcp.ClientSession) (state string, refused *mcp.CallToolResult) {
	t.Helper()
	res, err := host.CallTool(ctxT(t), &mcp.CallToolParams{Name: "ask.survey", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput() && strings.HasPrefix(res.RequestState, "relay.") {
		return res.RequestState, nil
	}
	return "", res
}

// answerSurvey continues ask.survey on host with state, answering "red".
func answerSurvey(t *testing.T, host *mcp.ClientSession, state string) *mcp.CallToolResult {
	t.Helper()
	res, err := host.CallTool(ctxT(t), &mcp.CallToolParams{Name: "ask.survey", Arguments: map[string]any{}, RequestState: state,
		InputResponses: mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "red"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Two replicas on one etcd: a pass-through tool's question relayed through one is answered
// through the other, once (a replay is refused request_state_replayed on both), and the
// principal's share of relayed questions is counted across both.
func TestRelayedQuestionsAcrossReplicas(t *testing.T) {
	hosts := relayReplicas(t, etcdtest.Start(t), map[string]any{"principal_pending": 2})
	state, refused := askSurvey(t, hosts[0])
	if refused != nil {
		t.Fatalf("ask on the first replica: %q %s", reason(refused), text(refused))
	}
	if res := answerSurvey(t, hosts[1], state); res.IsError || text(res) != "color: red" {
		t.Fatalf("answer on the second replica: isError=%v %q %v", res.IsError, text(res), res.Meta)
	}
	for i, host := range hosts {
		if res := answerSurvey(t, host, state); !res.IsError || reason(res) != api.ReasonStateReplayed {
			t.Errorf("replay on replica %d: isError=%v %q %v", i, res.IsError, text(res), res.Meta)
		}
	}
	// The share is two: one question waits on each replica, and a third is refused on either.
	for i, host := range hosts {
		if _, refused := askSurvey(t, host); refused != nil {
			t.Fatalf("question %d: %q %s", i, reason(refused), text(refused))
		}
	}
	for i, host := range hosts {
		if _, refused := askSurvey(t, host); refused == nil || reason(refused) != api.ReasonBusyPrincipal {
			t.Errorf("third question on replica %d: %v, want busy_principal", i, refused)
		}
	}
}

// Two replicas on one etcd share each principal's token bucket: a burst of three first-round
// gated calls spread over both is three calls, not six, a minute on their common clock refills
// one, and another principal's bucket is its own.
func TestReplicasShareTheRateLimit(t *testing.T) {
	s := bankStack(t)
	endpoint := etcdtest.Start(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	const burst = 3
	hosts := map[string][]*mcp.ClientSession{}
	for range 2 {
		dir := t.TempDir()
		cfg := s.gatewayConfig(dir)
		cfg["state"] = map[string]any{"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/rate-replicas/",
			"calls_per_minute": 1, "call_burst": burst}
		gw, _ := runGatewayWith(t, dir, cfg, mcpgate.Options{Now: now})
		srv := httptest.NewServer(gw.Handler())
		t.Cleanup(srv.Close)
		g := &gateway{url: srv.URL}
		for _, token := range []string{userToken, otherToken} {
			hosts[token] = append(hosts[token], g.connect(t, token, manualMRTR))
		}
	}
	ctx := ctxT(t)
	first := func(host *mcp.ClientSession) string {
		t.Helper()
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedsInput() {
			return "input_required"
		}
		return reason(res)
	}
	for i := range 2 * burst {
		want := "input_required"
		if i >= burst {
			want = api.ReasonRateLimited
		}
		if got := first(hosts[userToken][i%2]); got != want {
			t.Fatalf("call %d, on replica %d: %q, want %q", i, i%2, got, want)
		}
	}
	// Whatever verdictd makes of it, the other principal's call is not the first one's to limit.
	if got := first(hosts[otherToken][1]); got == api.ReasonRateLimited {
		t.Fatalf("another principal: %q", got)
	}
	clock.Add(int64(time.Minute))
	for i, want := range []string{"input_required", api.ReasonRateLimited} {
		if got := first(hosts[userToken][1-i]); got != want {
			t.Fatalf("call %d a minute later: %q, want %q", i, got, want)
		}
	}
}
