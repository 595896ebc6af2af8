package audit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

const (
	d1 = "sha256:1111"
	d2 = "sha256:2222"
)

// TestAnomalies runs every case against a bbolt file pair and against a JSONL export pair: the
// two formats must give the same report.
func TestAnomalies(t *testing.T) {
	ask := decided("rec_ask", "ask_user", "", "")
	hold := decided("rec_hold", "hold", "", "")
	tests := []struct {
		name  string
		decs  []dec
		execs []api.ExecutionRecord
		want  []Kind
		check func(t *testing.T, r *Report)
	}{
		{
			name:  "clean pair",
			decs:  []dec{ask, issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)},
			check: func(t *testing.T, r *Report) {
				if r.Pairs != (PairCounts{Paired: 1}) {
					t.Errorf("pairs = %+v", r.Pairs)
				}
				if r.Decisions.Total != 2 || r.Decisions.ByOutcome["verdict_issued"] != 1 || r.Decisions.ByOutcome["ask_user"] != 1 {
					t.Errorf("decisions = %+v", r.Decisions)
				}
				if r.Executions.Total != 1 || r.Executions.ByDecision["executed"] != 1 {
					t.Errorf("executions = %+v", r.Executions)
				}
			},
		},
		{
			name: "refusals are never anomalies",
			decs: []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{
				exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted),
				exe("exe_2", "v1", "rec_1", d1, api.ExecutionNotExecuted), // a replay
				withReason(exe("exe_3", "v_forged", "rec_x", d2, api.ExecutionNotExecuted), "bad_signature"),
				withReason(exe("exe_4", "v1", "rec_1", d2, api.ExecutionNotExecuted), "arguments_mismatch"),
			},
			check: func(t *testing.T, r *Report) {
				want := map[string]int{"replayed": 1, "bad_signature": 1, "arguments_mismatch": 1}
				if !mapsEqual(r.Executions.RefusalsByReason, want) {
					t.Errorf("refusals = %v, want %v", r.Executions.RefusalsByReason, want)
				}
				if r.Executions.ByDecision["not_executed"] != 3 {
					t.Errorf("by decision = %v", r.Executions.ByDecision)
				}
			},
		},
		{
			name: "issued, never executed",
			decs: []dec{issued("rec_1", "v1", d1), issued("rec_2", "v2", d1)},
			check: func(t *testing.T, r *Report) {
				if r.Pairs != (PairCounts{IssuedNotExecuted: 2}) {
					t.Errorf("pairs = %+v", r.Pairs)
				}
			},
		},
		{
			name:  "execution without a verdict",
			decs:  []dec{ask},
			execs: []api.ExecutionRecord{exe("exe_1", "v_never", "rec_none", d1, api.ExecutionExecuted)},
			want:  []Kind{ExecutionWithoutVerdict},
			check: func(t *testing.T, r *Report) {
				if r.Pairs.Unpaired != 1 {
					t.Errorf("pairs = %+v", r.Pairs)
				}
				a := r.Anomalies[0]
				if a.VerdictID != "v_never" || !slices.Equal(a.ExecutionRecords, []string{"exe_1"}) {
					t.Errorf("anomaly = %+v", a)
				}
			},
		},
		{
			name:  "failed execution without a verdict",
			execs: []api.ExecutionRecord{exe("exe_1", "v_never", "", d1, api.ExecutionFailed)},
			want:  []Kind{ExecutionWithoutVerdict},
		},
		{
			name:  "execution of a decision that issued nothing, found by ref_record",
			decs:  []dec{hold},
			execs: []api.ExecutionRecord{exe("exe_1", "v_x", "rec_hold", d1, api.ExecutionExecuted)},
			want:  []Kind{DecisionNotIssued},
			check: func(t *testing.T, r *Report) {
				a := r.Anomalies[0]
				if !slices.Equal(a.DecisionRecords, []string{"rec_hold"}) || !strings.Contains(a.Message, `"hold"`) {
					t.Errorf("anomaly = %+v", a)
				}
			},
		},
		{
			name:  "execution of a decision that issued nothing, found by verdict id",
			decs:  []dec{decided("rec_odd", "hold", "v_odd", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v_odd", "rec_other", d1, api.ExecutionExecuted)},
			want:  []Kind{DecisionNotIssued},
		},
		{
			name: "executed twice on two executors",
			decs: []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{
				exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted),
				onExecutor(exe("exe_2", "v1", "rec_1", d1, api.ExecutionFailed), "executor-b"),
			},
			want: []Kind{ExecutedMoreThanOnce},
			check: func(t *testing.T, r *Report) {
				a := r.Anomalies[0]
				if !slices.Equal(a.ExecutionRecords, []string{"exe_1", "exe_2"}) || !strings.Contains(a.Message, "executor-b") {
					t.Errorf("anomaly = %+v", a)
				}
			},
		},
		{
			name: "an outcome_unknown and a retry count as two",
			decs: []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{
				exe("exe_1", "v1", "rec_1", d1, api.ExecutionOutcomeUnknown),
				exe("exe_2", "v1", "rec_1", d1, api.ExecutionExecuted),
			},
			want: []Kind{ExecutedMoreThanOnce},
		},
		{
			name:  "arguments digest differs",
			decs:  []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d2, api.ExecutionExecuted)},
			want:  []Kind{ArgumentsDigestMismatch},
			check: func(t *testing.T, r *Report) {
				if m := r.Anomalies[0].Message; !strings.Contains(m, d1) || !strings.Contains(m, d2) {
					t.Errorf("message %q names neither digest", m)
				}
			},
		},
		{
			name:  "started, never finished",
			decs:  []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)},
			want:  []Kind{StartedNotFinished},
			check: func(t *testing.T, r *Report) {
				if r.Executions.ByDecision["started"] != 1 || len(r.InFlight) != 0 {
					t.Errorf("report = %+v", r)
				}
			},
		},
		{
			name:  "outcome unknown is listed, not an anomaly",
			decs:  []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionOutcomeUnknown)},
			check: func(t *testing.T, r *Report) {
				if len(r.OutcomeUnknown) != 1 || r.OutcomeUnknown[0].RecordID != "exe_1" || r.OutcomeUnknown[0].Reason != store.ReasonCrashedInFlight {
					t.Errorf("outcome unknown = %+v", r.OutcomeUnknown)
				}
			},
		},
		{
			name: "principal and tool differ from the decision",
			decs: []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{func() api.ExecutionRecord {
				x := exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)
				x.Principal, x.Tool = "u_02", "schedule_transfer"
				return x
			}()},
			want: []Kind{BindingMismatch},
			check: func(t *testing.T, r *Report) {
				a := r.Anomalies[0]
				if !slices.Equal(a.Fields, []string{"principal", "tool"}) || !strings.Contains(a.Message, "u_02") {
					t.Errorf("anomaly = %+v", a)
				}
			},
		},
		{
			name:  "ref_record names another decision",
			decs:  []dec{issued("rec_1", "v1", d1), issued("rec_2", "v2", d1)},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_2", d1, api.ExecutionExecuted)},
			want:  []Kind{BindingMismatch},
		},
		{
			name:  "ref_phase differs",
			decs:  []dec{issued("rec_1", "v1", d1).with("phase", "at_instruction")},
			execs: []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)},
			want:  []Kind{BindingMismatch},
		},
		{
			name: "every finding of one verdict",
			decs: []dec{issued("rec_1", "v1", d1)},
			execs: []api.ExecutionRecord{
				exe("exe_1", "v1", "rec_1", d2, api.ExecutionExecuted),
				exe("exe_2", "v1", "rec_1", d1, api.ExecutionStarted),
			},
			want: []Kind{ExecutedMoreThanOnce, ArgumentsDigestMismatch, StartedNotFinished},
		},
		{
			name: "attempts without a verdict id stand alone",
			execs: []api.ExecutionRecord{
				exe("exe_1", "", "", d1, api.ExecutionExecuted),
				exe("exe_2", "", "", d1, api.ExecutionExecuted),
			},
			want: []Kind{ExecutionWithoutVerdict, ExecutionWithoutVerdict},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, format := range []string{"bbolt", "jsonl"} {
				t.Run(format, func(t *testing.T) {
					decs, execs := tc.decs, tc.execs
					if format == "bbolt" && slices.ContainsFunc(execs, startedWithoutVerdict) {
						// A bbolt file cannot hold such an attempt: the store refuses to
						// start it, so only an export can bring one to the audit.
						refusesToStart(t, execs)
						return
					}
					var ds, xs string
					if format == "bbolt" {
						ds = writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
						xs = writeBolt(t, tempPath(t, "executor.db"), nil, execs)
					} else {
						ds = writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), decs)
						xs = writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), execs)
					}
					r, err := Run(context.Background(), []Source{file(ds)}, []Source{file(xs)}, Options{})
					if err != nil {
						t.Fatal(err)
					}
					if got, want := kinds(r), sortedKinds(tc.want...); !slices.Equal(got, want) {
						t.Fatalf("anomalies = %v, want %v\n%+v", got, want, r.Anomalies)
					}
					if r.Clean != (len(tc.want) == 0) {
						t.Errorf("clean = %v with %d anomalies", r.Clean, len(r.Anomalies))
					}
					for _, a := range r.Anomalies {
						if a.Message == "" || len(a.ExecutionRecords)+len(a.DecisionRecords) == 0 {
							t.Errorf("anomaly without message or records: %+v", a)
						}
					}
					if tc.check != nil {
						tc.check(t, r)
					}
				})
			}
		})
	}
}

// startedWithoutVerdict reports whether x is an attempt that ran, or began to, with no verdict id.
func startedWithoutVerdict(x api.ExecutionRecord) bool {
	return x.VerdictID == "" && x.Decision != api.ExecutionNotExecuted
}

// refusesToStart checks that the store refuses to start the first of execs that has no verdict
// id, and writes nothing for it.
func refusesToStart(t *testing.T, execs []api.ExecutionRecord) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(tempPath(t, "executor.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	x := execs[slices.IndexFunc(execs, startedWithoutVerdict)]
	if err := db.Executions().Start(ctx, &x); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("start %s without a verdict id: %v, want %v", x.RecordID, err, store.ErrInvalid)
	}
	n := 0
	if err := db.Executions().Since(ctx, time.Time{}, func(*api.ExecutionRecord) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the refused start left %d records", n)
	}
}

func withReason(x api.ExecutionRecord, reason string) api.ExecutionRecord {
	x.Reason = reason
	return x
}

func onExecutor(x api.ExecutionRecord, id string) api.ExecutionRecord { x.ExecutorID = id; return x }

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMergedSources covers what only several sources at once can show.
func TestMergedSources(t *testing.T) {
	ctx := context.Background()
	decs := []dec{issued("rec_1", "v1", d1), issued("rec_2", "v2", d1), decided("rec_3", "ask_user", "", "")}

	t.Run("one verdict executed on two executors", func(t *testing.T) {
		ds := writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
		xa := writeBolt(t, tempPath(t, "a.db"), nil, []api.ExecutionRecord{exe("exe_a1", "v1", "rec_1", d1, api.ExecutionExecuted)})
		xb := writeBolt(t, tempPath(t, "b.db"), nil, []api.ExecutionRecord{
			onExecutor(exe("exe_b1", "v1", "rec_1", d1, api.ExecutionExecuted), "executor-b"),
			onExecutor(exe("exe_b2", "v2", "rec_2", d1, api.ExecutionExecuted), "executor-b"),
		})
		r, err := Run(ctx, []Source{file(ds)}, []Source{file(xa), file(xb)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(r); !slices.Equal(got, []Kind{ExecutedMoreThanOnce}) {
			t.Fatalf("anomalies = %v", r.Anomalies)
		}
		if r.Anomalies[0].VerdictID != "v1" || r.Pairs.Paired != 2 || r.Executions.Total != 3 {
			t.Errorf("report = %+v", r)
		}
	})

	t.Run("decision records of two replicas", func(t *testing.T) {
		da := writeBolt(t, tempPath(t, "replica-a.db"), decs[:1], nil)
		db := writeDecisionsJSONL(t, tempPath(t, "replica-b.jsonl"), decs[1:])
		xs := writeBolt(t, tempPath(t, "executor.db"), nil, []api.ExecutionRecord{
			exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted),
			exe("exe_2", "v2", "rec_2", d1, api.ExecutionExecuted),
		})
		r, err := Run(ctx, []Source{file(da), file(db)}, []Source{file(xs)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Clean || r.Pairs.Paired != 2 || r.Decisions.Total != 3 {
			t.Fatalf("report = %+v", r)
		}
	})

	t.Run("overlapping sources count each record once", func(t *testing.T) {
		execs := []api.ExecutionRecord{
			exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted),
			exe("exe_2", "v1", "rec_1", d1, api.ExecutionNotExecuted),
		}
		dsBolt := writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
		dsJSONL := writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), decs)
		xsBolt := writeBolt(t, tempPath(t, "executor.db"), nil, execs)
		xsJSONL := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), execs)
		r, err := Run(ctx, []Source{file(dsBolt), file(dsJSONL)}, []Source{file(xsBolt), file(xsJSONL), file(xsBolt)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Clean || r.Decisions.Total != 3 || r.Executions.Total != 2 || r.Executions.RefusalsByReason["replayed"] != 1 {
			t.Fatalf("report = %+v", r)
		}
		if r.Sources[0].Records != "decision" || r.Sources[1].Duplicates != 3 || r.Sources[3].Duplicates != 2 || r.Sources[4].Duplicates != 2 {
			t.Errorf("sources = %+v", r.Sources)
		}
	})

	t.Run("an old export's started record is superseded by its outcome", func(t *testing.T) {
		ds := writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
		old := writeExecutionsJSONL(t, tempPath(t, "old.jsonl"), []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)})
		now := writeBolt(t, tempPath(t, "executor.db"), nil, []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)})
		for _, order := range [][]Source{{file(old), file(now)}, {file(now), file(old)}} {
			r, err := Run(ctx, []Source{file(ds)}, order, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Clean || r.Executions.ByDecision["executed"] != 1 || r.Executions.Total != 1 {
				t.Fatalf("report = %+v", r)
			}
		}
	})

	t.Run("two sources disagree about one execution record", func(t *testing.T) {
		ds := writeBolt(t, tempPath(t, "verdictd.db"), decs, nil)
		a := writeExecutionsJSONL(t, tempPath(t, "a.jsonl"), []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionExecuted)})
		b := writeExecutionsJSONL(t, tempPath(t, "b.jsonl"), []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionFailed)})
		r, err := Run(ctx, []Source{file(ds)}, []Source{file(a), file(b)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(r); !slices.Equal(got, []Kind{ConflictingRecords}) {
			t.Fatalf("anomalies = %+v", r.Anomalies)
		}
		if f := r.Anomalies[0].Fields; !slices.Contains(f, "execution_decision") {
			t.Errorf("fields = %v", f)
		}
	})

	t.Run("two sources disagree about one decision record", func(t *testing.T) {
		a := writeDecisionsJSONL(t, tempPath(t, "a.jsonl"), decs[:1])
		b := writeDecisionsJSONL(t, tempPath(t, "b.jsonl"), []dec{decided("rec_1", "hold", "", "")})
		xs := writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), nil)
		r, err := Run(ctx, []Source{file(a), file(b)}, []Source{file(xs)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(r); !slices.Equal(got, []Kind{ConflictingRecords}) {
			t.Fatalf("anomalies = %+v", r.Anomalies)
		}
	})

	t.Run("two replicas issued the same verdict id", func(t *testing.T) {
		a := writeBolt(t, tempPath(t, "a.db"), []dec{issued("rec_a", "v1", d1)}, nil)
		b := writeBolt(t, tempPath(t, "b.db"), []dec{issued("rec_b", "v1", d1)}, nil)
		xs := writeBolt(t, tempPath(t, "x.db"), nil, []api.ExecutionRecord{exe("exe_1", "v1", "rec_a", d1, api.ExecutionExecuted)})
		r, err := Run(ctx, []Source{file(a), file(b)}, []Source{file(xs)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(r); !slices.Equal(got, []Kind{VerdictIssuedTwice}) {
			t.Fatalf("anomalies = %+v", r.Anomalies)
		}
		if got := r.Anomalies[0].DecisionRecords; !slices.Equal(got, []string{"rec_a", "rec_b"}) {
			t.Errorf("decision records = %v", got)
		}
	})
}

func TestStartedGrace(t *testing.T) {
	ds := writeDecisionsJSONL(t, tempPath(t, "records.jsonl"), []dec{issued("rec_1", "v1", d1)})
	xs := writeExecutionsJSONL(t, tempPath(t, "executions.jsonl"), []api.ExecutionRecord{exe("exe_1", "v1", "rec_1", d1, api.ExecutionStarted)})
	started := t0.Add(time.Second)
	tests := []struct {
		name     string
		grace    time.Duration
		now      time.Time
		inFlight bool
	}{
		{"no grace", 0, started.Add(time.Second), false},
		{"within the grace", time.Minute, started.Add(30 * time.Second), true},
		{"past the grace", time.Minute, started.Add(2 * time.Minute), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(context.Background(), []Source{file(ds)}, []Source{file(xs)},
				Options{StartedGrace: tc.grace, Now: func() time.Time { return tc.now }})
			if err != nil {
				t.Fatal(err)
			}
			if tc.inFlight != (len(r.InFlight) == 1) || tc.inFlight != r.Clean {
				t.Errorf("in flight %v, clean %v, anomalies %+v", r.InFlight, r.Clean, r.Anomalies)
			}
		})
	}
}

func TestNoSources(t *testing.T) {
	xs := file(writeExecutionsJSONL(t, tempPath(t, "x.jsonl"), nil))
	if _, err := Run(context.Background(), nil, []Source{xs}, Options{}); !errors.Is(err, ErrNoSources) {
		t.Errorf("err = %v", err)
	}
	if _, err := Run(context.Background(), []Source{xs}, nil, Options{}); !errors.Is(err, ErrNoSources) {
		t.Errorf("err = %v", err)
	}
}
