package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// t0 is the fixtures' clock: records are written with times after it.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// dec is a decision record as verdictd writes it: the index metadata and the JSON body.
type dec struct {
	meta store.DecisionMeta
	body map[string]any
}

// issued returns a verdict_issued decision record for principal u_01 on bank/transfer.
func issued(recordID, verdictID, digest string) dec {
	return decided(recordID, "verdict_issued", verdictID, digest)
}

func decided(recordID, outcome, verdictID, digest string) dec {
	body := map[string]any{
		"schema_version":   "1",
		"record_id":        recordID,
		"action_key":       "u_01:send money:bank/transfer",
		"phase":            "at_trigger",
		"principal":        "u_01",
		"server":           "bank",
		"tool":             "transfer",
		"outcome":          outcome,
		"verdict_id":       nullable(verdictID),
		"arguments_digest": nullable(digest),
		"call_arguments":   map[string]any{"amount": 500000, "to_account": "110-222-333"},
		"timestamp":        t0.Format(time.RFC3339Nano),
	}
	return dec{
		meta: store.DecisionMeta{
			RecordID: recordID, ActionKey: "u_01:send money:bank/transfer", Outcome: outcome,
			VerdictID: verdictID, Time: t0,
		},
		body: body,
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// with returns d with body members replaced.
func (d dec) with(kv ...any) dec {
	body := make(map[string]any, len(d.body))
	for k, v := range d.body {
		body[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		body[kv[i].(string)] = kv[i+1]
	}
	d.body = body
	return d
}

func (d dec) json(t testing.TB) []byte {
	b, err := json.Marshal(d.body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exe returns an execution record of verdict vid, bound like issued's record rec.
func exe(recordID, vid, rec, digest string, decision api.ExecutionDecision) api.ExecutionRecord {
	x := api.ExecutionRecord{
		RecordID: recordID, ExecutorID: "executor-bank", VerdictID: vid,
		ActionKey: "u_01:send money:bank/transfer", RefPhase: "at_trigger", RefRecord: rec,
		Principal: "u_01", Server: "bank", Tool: "transfer", ArgumentsDigest: digest,
		Decision: decision, StartedAt: t0.Add(time.Second), Verdict: "eyJ.eyJ.sig",
	}
	if decision != api.ExecutionStarted {
		x.FinishedAt = t0.Add(2 * time.Second)
	}
	switch decision {
	case api.ExecutionExecuted:
		x.ResultDigest = "sha256:result"
	case api.ExecutionNotExecuted:
		x.Reason = "replayed"
	case api.ExecutionFailed:
		x.Reason = "tool_error"
	case api.ExecutionOutcomeUnknown:
		x.Reason = store.ReasonCrashedInFlight
	}
	return x
}

// writeBolt writes a bbolt file through the store's own write path, as the daemons do.
func writeBolt(t testing.TB, path string, decs []dec, execs []api.ExecutionRecord) string {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	for _, d := range decs {
		if err := db.Decisions().Append(ctx, d.meta, d.json(t)); err != nil {
			t.Fatalf("append %s: %v", d.meta.RecordID, err)
		}
	}
	for _, x := range execs {
		x := x
		if x.Decision == api.ExecutionNotExecuted {
			if err := db.Executions().RecordRefusal(ctx, &x); err != nil {
				t.Fatalf("refusal %s: %v", x.RecordID, err)
			}
			continue
		}
		final, finished, reason, result := x.Decision, x.FinishedAt, x.Reason, x.ResultDigest
		x.Reason, x.ResultDigest = "", ""
		if err := db.Executions().Start(ctx, &x); err != nil {
			t.Fatalf("start %s: %v", x.RecordID, err)
		}
		if final != api.ExecutionStarted {
			if _, err := db.Executions().Finish(ctx, x.RecordID, final, reason, result, finished); err != nil {
				t.Fatalf("finish %s: %v", x.RecordID, err)
			}
		}
	}
	return path
}

// writeDecisionsJSONL writes an export of decision records.
func writeDecisionsJSONL(t testing.TB, path string, decs []dec) string {
	t.Helper()
	var b []byte
	for _, d := range decs {
		b = append(append(b, d.json(t)...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeExecutionsJSONL writes an export of execution records in the contract's form.
func writeExecutionsJSONL(t testing.TB, path string, execs []api.ExecutionRecord) string {
	t.Helper()
	var b []byte
	for _, x := range execs {
		line, err := json.Marshal(&x)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func file(path string) Source { return &File{Path: path, LockTimeout: 50 * time.Millisecond} }

func kinds(r *Report) []Kind {
	out := make([]Kind, len(r.Anomalies))
	for i, a := range r.Anomalies {
		out[i] = a.Kind
	}
	slices.Sort(out)
	return out
}

func sortedKinds(ks ...Kind) []Kind {
	ks = slices.Clone(ks)
	slices.Sort(ks)
	if ks == nil {
		ks = []Kind{}
	}
	return ks
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }
