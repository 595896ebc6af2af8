package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 30, 9, 12, 3, 0, time.UTC)

func newExecution(verdictID string, at time.Time) *api.ExecutionRecord {
	return &api.ExecutionRecord{
		ExecutorID: "executor-bank", VerdictID: verdictID, ActionKey: "u_01:send money:bank/transfer",
		RefPhase: "at_trigger", RefRecord: "rec_1", Principal: "u_01", Server: "bank", Tool: "transfer",
		ArgumentsDigest: "sha256:ab", StartedAt: at, Verdict: "eyJ.eyJ.sig",
	}
}

// The JSON form carries exactly the documented members (docs/api.md), with nulls for what is unknown.
func TestExecutionJSONMembers(t *testing.T) {
	x := newExecution("jti_1", t0)
	x.RecordID, x.Decision = "exe_1", api.ExecutionStarted
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := []string{"action_key", "actor", "arguments_digest", "execution_decision", "executor_id",
		"finished_at", "principal", "reason", "record_id", "ref_phase", "ref_record", "result_digest",
		"server", "started_at", "tool", "verdict", "verdict_id"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("members:\n got %v\nwant %v", got, want)
	}
	if m["actor"] != "executor" || m["execution_decision"] != "started" || m["finished_at"] != nil ||
		m["reason"] != nil || m["result_digest"] != nil || m["started_at"] != "2026-11-30T09:12:03Z" {
		t.Fatalf("record: %s", b)
	}
	var back api.ExecutionRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, x) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, *x)
	}
}

func TestExecutionUnmarshalRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"no record id":     `{"actor":"executor","execution_decision":"executed"}`,
		"other actor":      `{"record_id":"x","actor":"verdictd","execution_decision":"executed"}`,
		"unknown decision": `{"record_id":"x","actor":"executor","execution_decision":"execute"}`,
		"no decision":      `{"record_id":"x","actor":"executor"}`,
		"not an object":    `[]`,
	} {
		var x api.ExecutionRecord
		if err := json.Unmarshal([]byte(in), &x); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestExecutionLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	ex := db.Executions()
	ctx := context.Background()

	x := newExecution("jti_1", t0)
	if err := ex.Start(ctx, x); err != nil {
		t.Fatal(err)
	}
	if x.RecordID == "" || x.Decision != api.ExecutionStarted {
		t.Fatalf("Start did not fill the record: %+v", x)
	}
	got, err := ex.Get(ctx, x.RecordID)
	if err != nil || got.Decision != api.ExecutionStarted || !got.FinishedAt.IsZero() {
		t.Fatalf("Get after Start: %+v, %v", got, err)
	}
	if err := ex.Start(ctx, x); !errors.Is(err, ErrExists) {
		t.Fatalf("second Start of the same record id: %v", err)
	}

	fin, err := ex.Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "sha256:cd", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if fin.Decision != api.ExecutionExecuted || fin.ResultDigest != "sha256:cd" || !fin.FinishedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("Finish returned %+v", fin)
	}
	if _, err := ex.Finish(ctx, x.RecordID, api.ExecutionFailed, "again", "", t0.Add(2*time.Second)); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("second Finish: %v", err)
	}
	if _, err := ex.Finish(ctx, "exe_missing", api.ExecutionExecuted, "", "", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Finish of a missing record: %v", err)
	}
	if _, err := ex.Finish(ctx, x.RecordID, api.ExecutionStarted, "", "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Finish to started: %v", err)
	}

	refusal := &api.ExecutionRecord{ExecutorID: "executor-bank", VerdictID: "jti_1", Reason: "replayed", StartedAt: t0.Add(3 * time.Second)}
	if err := ex.RecordRefusal(ctx, refusal); err != nil {
		t.Fatal(err)
	}
	if refusal.Decision != api.ExecutionNotExecuted || !refusal.FinishedAt.Equal(refusal.StartedAt) {
		t.Fatalf("refusal: %+v", refusal)
	}
	malformed := &api.ExecutionRecord{ExecutorID: "executor-bank", Reason: "malformed", StartedAt: t0.Add(4 * time.Second)}
	if err := ex.RecordRefusal(ctx, malformed); err != nil {
		t.Fatal(err)
	}
	if err := ex.RecordRefusal(ctx, &api.ExecutionRecord{ExecutorID: "e", StartedAt: t0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("refusal without reason: %v", err)
	}

	// Everything survives a reopen.
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db = openPath(t, path)
	ex = db.Executions()
	byVerdict, err := ex.ByVerdict(ctx, "jti_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(byVerdict) != 2 || byVerdict[0].Decision != api.ExecutionExecuted || byVerdict[1].Decision != api.ExecutionNotExecuted {
		t.Fatalf("ByVerdict: %+v", byVerdict)
	}
	if got, _ := ex.ByVerdict(ctx, "jti_"); len(got) != 0 {
		t.Fatalf("ByVerdict of a prefix matched %d records", len(got))
	}
	var order []string
	if err := ex.Since(ctx, t0.Add(time.Second), func(x *api.ExecutionRecord) error {
		order = append(order, x.Reason)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"replayed", "malformed"}) {
		t.Fatalf("Since: %v", order)
	}
}

func TestStartTxChecksBeforeWriting(t *testing.T) {
	db := openTest(t)
	ex := db.Executions()
	for name, x := range map[string]*api.ExecutionRecord{
		"no verdict id":  {ExecutorID: "e", StartedAt: t0},
		"no executor id": {VerdictID: "j", StartedAt: t0},
		"no start time":  {ExecutorID: "e", VerdictID: "j"},
	} {
		if err := ex.Start(context.Background(), x); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// RecoverStarted turns what a crash left in flight into outcome_unknown, once, and leaves
// finished records alone.
func TestRecoverStarted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	ctx := context.Background()
	ex := db.Executions()
	inFlight := []*api.ExecutionRecord{newExecution("jti_a", t0), newExecution("jti_b", t0.Add(time.Millisecond))}
	done := newExecution("jti_c", t0)
	for _, x := range append(inFlight, done) {
		if err := ex.Start(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ex.Finish(ctx, done.RecordID, api.ExecutionFailed, "tool_error", "", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}

	db = openPath(t, path)
	ex = db.Executions()
	restart := t0.Add(time.Minute)
	got, err := ex.RecoverStarted(ctx, restart)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("recovered %d records, want 2", len(got))
	}
	for _, x := range inFlight {
		rec, err := ex.Get(ctx, x.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Decision != api.ExecutionOutcomeUnknown || rec.Reason != ReasonCrashedInFlight || !rec.FinishedAt.Equal(restart) {
			t.Errorf("recovered record: %+v", rec)
		}
		if _, err := ex.Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "", restart); !errors.Is(err, ErrNotStarted) {
			t.Errorf("Finish after recovery: %v", err)
		}
	}
	if rec, _ := ex.Get(ctx, done.RecordID); rec.Decision != api.ExecutionFailed {
		t.Errorf("finished record changed: %+v", rec)
	}
	if again, err := ex.RecoverStarted(ctx, restart); err != nil || len(again) != 0 {
		t.Fatalf("second RecoverStarted: %d records, %v", len(again), err)
	}
}

func TestFinishStarted(t *testing.T) {
	db := openPath(t, filepath.Join(t.TempDir(), "verdict.db"))
	ex := db.Executions()
	ctx := context.Background()
	start := func(jti string) *api.ExecutionRecord {
		t.Helper()
		x := newExecution(jti, t0)
		if err := ex.Start(ctx, x); err != nil {
			t.Fatal(err)
		}
		return x
	}

	x := start("jti_1")
	stale := *x
	val, err := ex.FinishStarted(ctx, x, api.ExecutionExecuted, "", "sha256:cd", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if x.Decision != api.ExecutionExecuted || x.ResultDigest != "sha256:cd" || !x.FinishedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("FinishStarted left %+v", x)
	}
	got, err := ex.Get(ctx, x.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := got.MarshalJSON()
	if string(val) != string(again) {
		t.Fatalf("returned JSON is not the stored record:\n%s\n%s", val, again)
	}

	moved := start("jti_2")
	moved.Tool = "other"
	recovered := start("jti_3")
	staleRecovered := *recovered
	if _, err := ex.RecoverStarted(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		x        *api.ExecutionRecord
		decision api.ExecutionDecision
		want     error
	}{
		{"finished record", x, api.ExecutionFailed, ErrNotStarted},
		{"stale copy of a finished record", &stale, api.ExecutionFailed, ErrNotStarted},
		{"record recovered as outcome_unknown", &staleRecovered, api.ExecutionExecuted, ErrNotStarted},
		{"recovered record the caller changed", moved, api.ExecutionExecuted, ErrNotStarted},
		{"missing record", &api.ExecutionRecord{RecordID: "exe_missing", Decision: api.ExecutionStarted, ExecutorID: "e", StartedAt: t0}, api.ExecutionExecuted, ErrNotFound},
		{"not a final decision", &staleRecovered, api.ExecutionStarted, ErrInvalid},
	}
	for _, tt := range tests {
		before := *tt.x
		if _, err := ex.FinishStarted(ctx, tt.x, tt.decision, "", "", t0.Add(2*time.Second)); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if *tt.x != before {
			t.Errorf("%s: the caller's record changed on error", tt.name)
		}
	}

	changed := start("jti_4")
	changed.Principal = "someone else"
	if _, err := ex.FinishStarted(ctx, changed, api.ExecutionExecuted, "", "", t0.Add(time.Second)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("finish of a record that differs from the stored one: %v", err)
	}
	stored, err := ex.Get(ctx, changed.RecordID)
	if err != nil || stored.Decision != api.ExecutionStarted || stored.Principal == "someone else" {
		t.Fatalf("a refused finish wrote: %+v, %v", stored, err)
	}
}

// The keys a record is written under, laid out in one buffer, are the ones the lookups build
// with timeKey and lenPrefixed.
func TestExecutionKeys(t *testing.T) {
	for _, x := range []api.ExecutionRecord{
		{RecordID: "exe_01", VerdictID: "q1w2e3r4t5y6u7i8o9p0aQ", StartedAt: time.Unix(1_900_000_000, 123)},
		{RecordID: "exe_02", StartedAt: time.Unix(1_900_000_000, 0)},
		{RecordID: "exe_03", VerdictID: strings.Repeat("v", 300), StartedAt: time.Unix(0, 0)},
		{RecordID: "exe_04", VerdictID: "v", StartedAt: time.Unix(-5, 0)},
	} {
		id, byTime, byVerdict := executionKeys(&x)
		if string(id) != x.RecordID {
			t.Errorf("%s: id %q", x.RecordID, id)
		}
		if want := slices.Concat(timeKey(x.StartedAt), []byte(x.RecordID)); !bytes.Equal(byTime, want) {
			t.Errorf("%s: time key %x, want %x", x.RecordID, byTime, want)
		}
		var want []byte
		if x.VerdictID != "" {
			want = slices.Concat(lenPrefixed(x.VerdictID), []byte(x.RecordID))
		}
		if !bytes.Equal(byVerdict, want) || (byVerdict == nil) != (want == nil) {
			t.Errorf("%s: verdict key %x, want %x", x.RecordID, byVerdict, want)
		}
		// Appending to one key must never write into another.
		_ = append(id, 'X')
		_ = append(byTime, 'X')
		if !bytes.Equal(byTime, slices.Concat(timeKey(x.StartedAt), []byte(x.RecordID))) || (x.VerdictID != "" && !bytes.Equal(byVerdict, want)) {
			t.Errorf("%s: keys share capacity", x.RecordID)
		}
	}
}

// isStartedForm must answer as bytes.Equal(stored, x.MarshalJSON()) does, for any record and
// any stored bytes: those of x itself, of a record that differs from x in one field (the
// finished members among them), or of something else.
func TestIsStartedFormIsEqualToEncoding(t *testing.T) {
	member := []string{"", "a", `,"execution_decision":"started","reason":null`, `","verdict":"x`, `,"started_at":`,
		`,"finished_at":null,"result_digest":null`, "<&>\u2028\"\\", "\xff", "exe_01"}
	str := rapid.OneOf(rapid.SampledFrom(member), rapid.String())
	tm := rapid.Custom(func(t *rapid.T) time.Time {
		return t0.Add(time.Duration(rapid.Int64Range(-1e18, 1e18).Draw(t, "d")))
	})
	rapid.Check(t, func(rt *rapid.T) {
		x := &api.ExecutionRecord{
			RecordID: str.Draw(rt, "id"), ExecutorID: str.Draw(rt, "executor"), VerdictID: str.Draw(rt, "jti"),
			ActionKey: str.Draw(rt, "key"), RefPhase: str.Draw(rt, "phase"), RefRecord: str.Draw(rt, "ref"),
			Principal: str.Draw(rt, "principal"), Server: str.Draw(rt, "server"), Tool: str.Draw(rt, "tool"),
			ArgumentsDigest: str.Draw(rt, "args"), Decision: api.ExecutionStarted, StartedAt: tm.Draw(rt, "started"),
			Verdict: str.Draw(rt, "verdict"),
		}
		if rapid.IntRange(0, 9).Draw(rt, "odd started") == 0 {
			x.Reason, x.ResultDigest = str.Draw(rt, "reason"), str.Draw(rt, "result")
		}
		fin := *x
		fin.Decision = rapid.SampledFrom([]api.ExecutionDecision{api.ExecutionExecuted, api.ExecutionFailed, api.ExecutionOutcomeUnknown, api.ExecutionNotExecuted}).Draw(rt, "decision")
		fin.Reason, fin.ResultDigest, fin.FinishedAt = str.Draw(rt, "fin reason"), str.Draw(rt, "fin result"), tm.Draw(rt, "finished")
		finJSON, err := fin.MarshalJSON()
		if err != nil {
			rt.Skip("no encoding of the finished record")
		}
		was, err := x.MarshalJSON()
		if err != nil {
			rt.Skip("no encoding of the started record")
		}
		y := *x
		switch rapid.IntRange(0, 6).Draw(rt, "stored") {
		case 0:
			y.Principal = str.Draw(rt, "other")
		case 1:
			y.Reason = str.Draw(rt, "other")
		case 2:
			y.FinishedAt = tm.Draw(rt, "other")
		case 3:
			y.Decision = fin.Decision
		case 4:
			y.Verdict = str.Draw(rt, "other")
		case 5:
			y.StartedAt = tm.Draw(rt, "other")
		}
		stored, err := y.MarshalJSON()
		if err != nil {
			stored = was
		}
		if rapid.IntRange(0, 9).Draw(rt, "cut") == 0 && len(stored) > 0 {
			stored = stored[:rapid.IntRange(0, len(stored)-1).Draw(rt, "at")]
		}
		got, err := isStartedForm(stored, x, finJSON)
		if err != nil {
			rt.Fatal(err)
		}
		want := bytes.Equal(stored, was)
		if got != want {
			rt.Fatalf("isStartedForm %v, want %v:\nstored %s\nwas    %s\nfin    %s", got, want, stored, was, finJSON)
		}
		// The shortcut, not the full encoding, answers for a record as the executor starts it.
		if want && x.Reason == "" && x.ResultDigest == "" && !finishedFrom(stored, finJSON) {
			rt.Fatalf("the started form was not derived from the finished one:\nstored %s\nfin    %s", stored, finJSON)
		}
	})
}

func BenchmarkIsStartedForm(b *testing.B) {
	x := newExecution("bmV2ZXItaXNzdWVkLXZlcmRpY3Q", t0)
	x.RecordID, x.Decision, x.Verdict = "exe_01JABCDEFGHJKMNPQRSTVWXYZ0", api.ExecutionStarted, strings.Repeat("e", 700)
	stored, _ := x.MarshalJSON()
	fin := *x
	fin.Decision, fin.ResultDigest, fin.FinishedAt = api.ExecutionExecuted, "sha256:"+strings.Repeat("cd", 32), t0.Add(time.Second)
	finJSON, _ := fin.MarshalJSON()
	b.Run("derived", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := isStartedForm(stored, x, finJSON); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			was, err := x.MarshalJSON()
			if err != nil || !bytes.Equal(stored, was) {
				b.Fatal(err)
			}
		}
	})
}

// An execution record survives a round trip through its JSON, whatever its strings hold; bytes
// that are not UTF-8 come back as U+FFFD rather than refusing the record.
func TestExecutionJSONRoundTrip(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		reason, want string
	}{
		{"", ""},
		{"<&> \u2028 \x00 \"\\", "<&> \u2028 \x00 \"\\"},
		{"bad \xff byte", "bad \ufffd byte"},
	} {
		x := &api.ExecutionRecord{RecordID: "exe_1", ExecutorID: "e", VerdictID: "v", Decision: api.ExecutionFailed, Reason: tc.reason,
			StartedAt: started, FinishedAt: started.Add(time.Second)}
		b, err := x.MarshalJSON()
		if err != nil {
			t.Fatalf("%q: %v", tc.reason, err)
		}
		var got api.ExecutionRecord
		if err := got.UnmarshalJSON(b); err != nil {
			t.Fatalf("%q: %s: %v", tc.reason, b, err)
		}
		if got.Reason != tc.want || !got.StartedAt.Equal(started) || !got.FinishedAt.Equal(x.FinishedAt) || got.VerdictID != "v" {
			t.Errorf("%q: round trip gives %+v", tc.reason, got)
		}
	}
}
