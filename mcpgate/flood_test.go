package mcpgate_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/daemon"
)

// manualMRTR is a 2026-07-28 host that hands input_required results to the test instead of
// asking a user.
var manualMRTR = &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}

// One principal flooding first-round gated calls gets its share of questions, then
// busy_principal, then rate_limited, and none of the refused calls reaches verdictd; another
// principal's call meanwhile gets its question and completes.
func TestOnePrincipalsFloodLeavesOthersTheirQuestions(t *testing.T) {
	s := bankStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	const share, burst = 4, 12
	cfg["state"] = map[string]any{"principal_pending": share, "call_burst": burst, "calls_per_minute": 1}
	bothPay(cfg)
	g := startGateway(t, cfg)
	ctx := ctxT(t)
	flooder := g.connect(t, otherToken, manualMRTR)
	asked := g.metric(t, `mcpgate_preflights_total{outcome="ask_user"}`)

	reasons := map[string]int{}
	for i := range burst + 3 {
		res, err := flooder.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Fatal(err)
		}
		got := reason(res)
		if res.NeedsInput() {
			got = "input_required"
		}
		reasons[got]++
		switch {
		case i < share && got != "input_required":
			t.Fatalf("call %d: %q (%s), want its question", i, got, text(res))
		case i >= share && i < burst && got != "busy_principal":
			t.Fatalf("call %d: %q (%s), want busy_principal", i, got, text(res))
		case i >= burst && got != "rate_limited" && got != "busy_principal":
			// busy_principal only if a minute passed and the bucket refilled meanwhile.
			t.Fatalf("call %d: %q (%s), want rate_limited", i, got, text(res))
		}
	}
	if n := g.metric(t, `mcpgate_preflights_total{outcome="ask_user"}`) - asked; n != share {
		t.Errorf("verdictd was asked %v times for the flood, want %d: refusals must come before the preflight", n, share)
	}
	if n := g.metric(t, `mcpgate_state_refused_total{reason="busy_principal"}`); n < burst-share {
		t.Errorf("busy_principal counted %v, want at least %d", n, burst-share)
	}

	mark := s.mark(t)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	victim := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
	res, err := victim.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(u.shown()) == 0 {
		t.Fatalf("the other principal's call: %s %v after %d questions, want it asked and done", text(res), res.Meta, len(u.shown()))
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 1 {
		t.Fatalf("bank saw %d transfers, want exactly 1", n)
	}
}

// largeFlood is a gateway whose state bounds are small next to the calls two principals send
// it: calls carrying ~900 KB instruction segments, two at a time, 60 per principal.
type largeFlood struct {
	g        *gateway
	sessions []*mcp.ClientSession
	ctx      context.Context
	meta     mcp.Meta
}

const (
	floodPrincipalBytes = 4 << 20
	floodMaxBytes       = 16 << 20
	floodInFlight       = 2
	floodPerPrincipal   = 60
	floodSegment        = 900 << 10
)

// startLargeFlood starts the gateway and makes one call of each principal, so that what is
// measured afterwards has every code path's buffers and goroutines in place.
func startLargeFlood(tb testing.TB) *largeFlood {
	s := bankStack(tb)
	cfg := s.gatewayConfig(tb.TempDir())
	cfg["state"] = map[string]any{"principal_bytes": floodPrincipalBytes, "max_bytes": floodMaxBytes,
		"principal_pending": 100, "call_burst": 1000, "calls_per_minute": 1000}
	bothPay(cfg)
	f := &largeFlood{g: startGateway(tb, cfg)}
	// 900 KB calls are slow to encode under the race detector: the flood gets its own wait.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	tb.Cleanup(cancel)
	f.ctx = ctx
	said := strings.Repeat("send money to the account I gave you. ", floodSegment/38)
	f.meta = mcp.Meta{"io.verdict/instruction": []map[string]any{{"text": said, "trust": "user", "origin": "chat"}}}
	f.sessions = []*mcp.ClientSession{f.g.connect(tb, userToken, manualMRTR), f.g.connect(tb, otherToken, manualMRTR)}
	for _, sess := range f.sessions {
		if got := f.call(tb, sess); got != "input_required" {
			tb.Fatalf("first large call: %q, want its question", got)
		}
	}
	return f
}

// call makes one large gated call and returns how it ended.
func (f *largeFlood) call(tb testing.TB, sess *mcp.ClientSession) string {
	res, err := sess.CallTool(f.ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(), Meta: f.meta})
	if err != nil {
		tb.Error(err)
		return "error"
	}
	if res.NeedsInput() {
		return "input_required"
	}
	return reason(res)
}

// run sends the flood and counts its calls by how they ended.
func (f *largeFlood) run(tb testing.TB) map[string]int {
	var mu sync.Mutex
	reasons := map[string]int{}
	var wg sync.WaitGroup
	for i := range floodInFlight {
		wg.Go(func() {
			for range floodPerPrincipal * len(f.sessions) / floodInFlight {
				got := f.call(tb, f.sessions[i%len(f.sessions)])
				mu.Lock()
				reasons[got]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return reasons
}

// A flood of large calls from two principals is held to the byte bounds: each principal keeps
// no more continuations than its principal_bytes holds, every other call is refused
// busy_principal, and the waiting continuations' bytes stay within max_bytes. Without the bounds every call kept its
// whole state, about 4 MB each. What the flood costs in resident memory is
// BenchmarkFloodOfLargeCalls's figure: a peak of memory depends on the garbage collector's
// pace on a loaded machine, and is no pass/fail of a test.
func TestFloodOfLargeCallsStaysWithinTheByteBounds(t *testing.T) {
	f := startLargeFlood(t)
	reasons := f.run(t)
	t.Logf("outcomes %v", reasons)

	// Each principal keeps at most principalBytes: 4 continuations of ~900 KiB each, the first
	// one included.
	if limit := 2 * (floodPrincipalBytes/floodSegment - 1); reasons["input_required"] > limit {
		t.Errorf("%d more continuations kept, want at most %d", reasons["input_required"], limit)
	}
	if reasons["busy_principal"] == 0 {
		t.Errorf("no call refused busy_principal: %v", reasons)
	}
	if n := reasons["input_required"] + reasons["busy_principal"]; n != floodPerPrincipal*len(f.sessions) {
		t.Errorf("outcomes %v: %d calls asked or refused busy_principal, want all %d", reasons, n, floodPerPrincipal*len(f.sessions))
	}
	if n := f.g.metric(t, "mcpgate_pending_bytes"); n > floodMaxBytes {
		t.Errorf("waiting continuations hold %v bytes, bound %d", n, floodMaxBytes)
	}
}

// BenchmarkFloodOfLargeCalls reports how far above its baseline the gateway's resident memory
// peaked (peak-KiB) while the flood of TestFloodOfLargeCallsStaysWithinTheByteBounds ran. The
// state bounds allow max_bytes plus, for each call in flight, about eight copies of its segment
// (the request body, the SDK's decoded _meta, its strict re-read, the preflight body, the
// record verdictd echoes, the stored encoding), times the garbage collector's headroom
// (daemon.DefaultGCPercent): about 150 MB, twice that for a collector starved of CPU. With the
// bounds the flood has peaked at 110–140 MB; without them its 120 calls kept 480 MB live.
func BenchmarkFloodOfLargeCalls(b *testing.B) {
	f := startLargeFlood(b)
	base := procStatus(b, f.g.cmd.Process.Pid)
	for b.Loop() {
		f.run(b)
	}
	after := procStatus(b, f.g.cmd.Process.Pid)
	b.ReportMetric(float64(after["VmHWM"]-base["VmRSS"]), "peak-KiB")
	b.ReportMetric(float64(after["VmRSS"]-base["VmRSS"]), "after-KiB")
	b.ReportMetric(float64(daemon.DefaultGCPercent), "GOGC")
}

// bothPay gives u_02 the stored account u_01 has, so that both principals' transfers are
// asked rather than refused for want of it.
func bothPay(cfg map[string]any) {
	ps := cfg["principals"].(map[string]any)
	ps["u_02"].(map[string]any)["pre_set_data"] = map[string]any{"from_account": "1102534471"}
}

// procStatus reads the kB fields of /proc/<pid>/status (VmRSS, VmHWM, ...).
func procStatus(t testing.TB, pid int) map[string]int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

// A host of an earlier revision is asked in place, and its call's state waits in the
// gateway's memory while the user answers: those calls are held to the principal's share too.
// With a share of one, a second call while the first one's question is open is busy_principal;
// another principal is asked; and once the first call ends, its place is free again.
func TestOlderHostsCallsWaitingInPlaceKeepToTheShare(t *testing.T) {
	s := bankStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["state"] = map[string]any{"principal_pending": 1}
	bothPay(cfg)
	g := startGateway(t, cfg)
	ctx := ctxT(t)

	asked := make(chan struct{}, 1)
	answer := make(chan struct{})
	waiting := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		<-answer
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	declining := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	first, err := g.connectAs(t, userToken, "2025-11-25", waiting)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := first.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-asked // the first call now waits in place for its user

	second, err := g.connectAs(t, userToken, "2025-11-25", declining)
	if err != nil {
		t.Fatal(err)
	}
	res, err := second.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if reason(res) != "busy_principal" {
		t.Errorf("second call while the first waits: %q %s, want busy_principal", reason(res), text(res))
	}
	other, err := g.connectAs(t, otherToken, "2025-11-25", declining)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()}); err != nil || reason(res) != "declined" {
		t.Errorf("another principal's call: %v %q %s, want asked (and declined)", err, reason(res), text(res))
	}

	close(answer)
	if res := <-done; res == nil || reason(res) != "declined" {
		t.Fatalf("the first call: %v, want declined", res)
	}
	res, err = second.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if reason(res) != "declined" {
		t.Errorf("a call after the first ended: %q %s, want asked (and declined)", reason(res), text(res))
	}
}
