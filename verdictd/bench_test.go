package verdictd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// inlinePolicy gates a transfer whose definition the policy lists itself: no tool server
// process, no labels, every value groundable, so one request is one verdict.
const inlinePolicy = `policy_version: "bench.1"
servers:
  pay:
    audience: [executor-bank]
    tools:
      - name: transfer
        description: Move money between accounts.
        inputSchema:
          type: object
          properties:
            from_account: {type: string, minLength: 1, maxLength: 64}
            to_account: {type: string, minLength: 1, maxLength: 64}
            amount: {type: integer, minimum: 1}
          required: [from_account, to_account, amount]
          additionalProperties: false
tools:
  pay/transfer:
    class: irreversible
    actions: ["send money"]
`

func oneShotRequest(conversation string) []byte {
	text := "send money: 500,000 won to 110-222-333"
	b, _ := json.Marshal(map[string]any{
		"principal": "u_01", "conversation_id": conversation, "server": "pay", "tool": "transfer",
		"instruction": []map[string]any{{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 10}}},
		"candidates": []map[string]any{
			{"field": "amount", "segment": 0, "span": []int{12, 19}, "value": 500000},
			{"field": "to_account", "segment": 0, "span": []int{27, 38}, "value": "110-222-333"},
		},
		"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user"}},
	})
	return b
}

func TestOneShotRequestIssues(t *testing.T) {
	e := newEnv(t, envOpts{policy: inlinePolicy})
	var req map[string]any
	json.Unmarshal(oneShotRequest("c1"), &req)
	if r := e.preflight(req); r.Outcome != "verdict_issued" {
		t.Fatalf("outcome %s\n%s", r.Outcome, r.raw)
	}
}

// BenchmarkPreflight measures POST /v1/preflight in process, through the HTTP handler, for
// requests that end in verdict_issued: decode, Gate 1, materialize, validate, canonicalize,
// sign, and a durable group commit of record and state. Parallel clients use distinct
// conversations, as real callers do.
func BenchmarkPreflight(b *testing.B) {
	benchPreflight(b, newEnv(b, envOpts{policy: inlinePolicy}))
}

// BenchmarkPreflightEtcd is BenchmarkPreflight with the state on a private single-member etcd
// on loopback: each verdict adds the reads its run makes and one etcd transaction (the
// verdict's summary for receipts) before the record's group commit.
func BenchmarkPreflightEtcd(b *testing.B) {
	benchPreflight(b, newReplicas(b, etcdtest.Start(b), 1, envOpts{policy: inlinePolicy})[0])
}

func benchPreflight(b *testing.B, e *env) {
	h := e.svc.Handler()
	var seq atomic.Int64
	var issued atomic.Int64
	b.SetParallelism(16) // 32 clients on 2 cores
	b.ReportAllocs()
	before := e.svc.db.Stats()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		body := oneShotRequest(fmt.Sprintf("c%d", seq.Add(1)))
		for pb.Next() {
			req := httptest.NewRequestWithContext(context.Background(), "POST", "/v1/preflight", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+callerToken)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"outcome":"verdict_issued"`) {
				b.Fatalf("%d %s", w.Code, w.Body.String())
			}
			issued.Add(1)
		}
	})
	b.ReportMetric(float64(issued.Load())/time.Since(start).Seconds(), "verdicts/s")
	// Fewer updates per commit means more commits, each with its fdatasync, for the same work.
	if st := e.svc.db.Stats(); st.Commits > before.Commits {
		b.ReportMetric(float64(st.Updates-before.Updates)/float64(st.Commits-before.Commits), "updates/commit")
		// Pages written do not depend on the machine's noise, unlike the rate.
		b.ReportMetric(float64(st.Pages-before.Pages)/float64(st.Commits-before.Commits), "pages/commit")
	}
}

// BenchmarkLogPreflight is the one log line of a preflight through the daemon's JSON handler:
// key-value pairs as arguments against the typed attributes logPreflight passes.
func BenchmarkLogPreflight(b *testing.B) {
	str := func(s string) *string { return &s }
	rec := &api.Record{RecordID: "rec_01KB0000000000000000000000", Outcome: api.OutcomeVerdictIssued,
		Gate: api.Gate{Kind: api.GateValue}, Server: "pay", Tool: "transfer", PolicyVersion: "bench.1",
		VerdictID: str("Jx3b9Yq2m4QzKc8vT1pW0A")}
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})).With("service", "verdictd")
	b.Run("pairs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			log.Info("preflight", "record_id", rec.RecordID, "outcome", rec.Outcome, "gate", rec.Gate.Kind,
				"server", rec.Server, "tool", rec.Tool, "policy_version", rec.PolicyVersion, "verdict_id", *rec.VerdictID)
		}
	})
	b.Run("attrs", func(b *testing.B) {
		s := &Service{log: log}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			s.logPreflight(ctx, rec)
		}
	})
}
