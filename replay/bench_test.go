package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/offline"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// capturedTransfers decides the example policy's transfer n times in process, with capture,
// and returns the stored records as verdictd keeps them: a confirmed transfer from the user's
// words whose memo is drafted, 4 value slots, a condition and 2 approvals.
func capturedTransfers(tb testing.TB, n int) (*policy.Policy, []*store.Decision) {
	tb.Helper()
	pol, err := policy.Load(filepath.Join("..", "examples", "policy.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "examples", "bank", "tools.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var tools []gates.Tool
	if err := json.Unmarshal(b, &tools); err != nil {
		tb.Fatal(err)
	}
	var tool gates.Tool
	for _, t := range tools {
		if t.Name == "transfer" {
			tool = t
		}
	}
	clock := &offline.Clock{}
	clock.Set(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	eng, err := offline.NewEngine(clock.Now, gates.RandomIDs{}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	body := []byte(`{"principal":"u_01","server":"bank","tool":"transfer",
		"instruction":[{"text":"Pay my landlord the rent: send 500,000 won to 110-222-333.","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,3]}},
		"candidates":[{"field":"amount","segment":0,"span":[31,38],"value":500000},
			{"field":"to_account","segment":0,"span":[46,57],"value":"110-222-333"},
			{"field":"memo","value":"Rent for January"}],
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user","origin":"settings"}}}`)
	out := make([]*store.Decision, n)
	for i := range out {
		req, err := gates.DecodeRequest(body, gates.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		in, capture := eng.Capture(gates.Input{Tool: tool, Policy: pol, Request: req, State: gates.NewMemState()})
		rec, err := eng.Run(context.Background(), in)
		if err != nil {
			tb.Fatal(err)
		}
		c, err := capture.Result(req, tool, clock.Now())
		if err != nil {
			tb.Fatal(err)
		}
		stored, err := apijson.AppendRecord(nil, rec)
		if err == nil {
			stored, err = apijson.AppendCapture(stored, c)
		}
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = &store.Decision{DecisionMeta: store.DecisionMeta{RecordID: rec.RecordID, Outcome: rec.Outcome, Time: clock.Now()}, Record: stored}
	}
	if o := out[0]; o.Outcome != api.OutcomeAskUser {
		tb.Fatalf("the recorded transfer is %s:\n%s", o.Outcome, o.Record)
	}
	return pol, out
}

// records is a Source of records held in memory.
type records []*store.Decision

func (r records) String() string { return "memory" }

func (r records) Decisions(_ context.Context, fn func(*store.Decision) error) error {
	for _, d := range r {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

func (r records) Executions(context.Context, func(*api.ExecutionRecord) error) error {
	return fmt.Errorf("no executions")
}

// BenchmarkReplay decides 1,000 captured preflights again under the policy they were decided
// by: one op reads the 1,000 stored records and decides each. The requirement is at least
// 5,000 records a second; BENCHMARKS.md sets the time per record beside gates'
// BenchmarkPreflight.
func BenchmarkReplay(b *testing.B) {
	pol, recs := capturedTransfers(b, 1000)
	r, err := New(pol)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rep, err := r.Run(b.Context(), []audit.Source{records(recs)}, Options{})
		if err != nil || rep.Replayed != len(recs) || rep.Changed != 0 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}
