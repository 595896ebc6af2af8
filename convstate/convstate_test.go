package convstate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/store"
)

// A backend is one Store under test. Its records stay in a bbolt file of their own, as a
// replica's do whichever store holds the state; fault is its Fault option.
type backend struct {
	name string
	open func(t *testing.T, db *store.DB, fault func(string) error) Store
}

func backends() []backend {
	return []backend{
		{"bbolt", func(t *testing.T, db *store.DB, fault func(string) error) Store {
			st, err := NewBolt(context.Background(), db, BoltOptions{Fault: fault})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"etcd", func(t *testing.T, db *store.DB, fault func(string) error) Store {
			return newTestEtcdOn(t, db, etcdtest.Start(t), EtcdOptions{Prefix: "/conformance/", Fault: fault})
		}},
	}
}

func openDB(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// commit commits r with rec, encoded as verdictd encodes it; a record without an id is stored
// under a fresh one.
func commit(r Run, rec *api.Record) error { return commitWith(r, rec, nil) }

// commitWith commits r with rec and approval.
func commitWith(r Run, rec *api.Record, approval *store.ApprovalWrite) error {
	c := *rec
	if c.RecordID == "" {
		c.RecordID = "rec_" + rand.Text()
	}
	meta := store.DecisionMeta{RecordID: c.RecordID, Outcome: c.Outcome, Time: time.Unix(1e9, 0)}
	if c.ActionKey != nil {
		meta.ActionKey = *c.ActionKey
	}
	enc, out, err := store.EncodeDecisionWith(meta, 0, func(b []byte) ([]byte, error) { return apijson.AppendRecord(b, &c) })
	if err != nil {
		return err
	}
	return r.Commit(context.Background(), &Write{Record: &c, Encoded: enc, Stored: out, Approval: approval, Attempt: 1})
}

func commitRun(t testing.TB, r Run, rec *api.Record) {
	t.Helper()
	if err := commit(r, rec); err != nil {
		t.Fatal(err)
	}
}

// TestConformance runs every backend through the same behaviour: what a run sees, what its
// commit makes durable, what a reset clears, how baselines are ordered, and deferred intents.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db *store.DB, st Store)
	}{
		{"RunBuffersUntilCommit", testRunBuffersUntilCommit},
		{"UnknownQuestions", testUnknownQuestions},
		{"Baselines", testBaselines},
		{"Deferred", testDeferred},
		{"NegativeCounts", testNegativeCounts},
		{"Uses", testUses},
		{"CommitTogether", testCommitTogether},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					db := openDB(t)
					tc.fn(t, db, b.open(t, db, nil))
				})
			}
		})
	}
}

func testRunBuffersUntilCommit(t *testing.T, db *store.DB, st Store) {
	ctx := context.Background()
	c := gates.Conversation{Principal: "u_01", ID: "c1"}
	other := gates.Conversation{Principal: "u_01", ID: "c10"} // shares a textual prefix with c1
	ask := &api.Record{Outcome: api.OutcomeAskUser}

	rs := st.Begin()
	if n, err := rs.Gate1Counts(ctx, c); err != nil || n != (gates.Gate1Counts{}) {
		t.Fatalf("fresh conversation: %+v %v", n, err)
	}
	rs.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1, Tool: 2})
	rs.SetSlotAsks(ctx, c, "k", "to_account", 2)
	rs.SaveQuestion(ctx, "q_1", gates.QuestionBinding{Principal: "u_01", ActionKey: "k", SlotID: "amount",
		Kind: api.QuestionApproval, Value: json.Number("9007199254740993"), Shown: map[string]any{"amount": json.Number("1.5")}})
	if n, _ := rs.Gate1Counts(ctx, c); n.Tool != 2 {
		t.Fatalf("a run does not see its own write: %+v", n)
	}
	if b, ok, _ := rs.Question(ctx, "q_1"); !ok || b.SlotID != "amount" {
		t.Fatalf("a run does not see its own question: %+v %v", b, ok)
	}
	// Nothing reaches the store before the commit.
	if n, _ := st.Begin().Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("uncommitted counters visible: %+v", n)
	}
	if _, ok, _ := st.Begin().Question(ctx, "q_1"); ok {
		t.Fatal("uncommitted question visible")
	}
	commitRun(t, rs, ask)

	rs2 := st.Begin()
	rs2.SetSlotAsks(ctx, other, "k", "to_account", 1)
	commitRun(t, rs2, &api.Record{RecordID: "rec_2", Outcome: api.OutcomeAskUser})

	fresh := st.Begin()
	if n, _ := fresh.Gate1Counts(ctx, c); n != (gates.Gate1Counts{Intent: 1, Tool: 2}) {
		t.Fatalf("committed counters: %+v", n)
	}
	if n, _ := fresh.SlotAsks(ctx, c, "k", "to_account"); n != 2 {
		t.Fatalf("committed asks: %d", n)
	}
	b, ok, err := fresh.Question(ctx, "q_1")
	if err != nil || !ok || b.SlotID != "amount" || b.Value != json.Number("9007199254740993") {
		t.Fatalf("question binding: %+v %v %v", b, ok, err)
	}

	// new_request resets this conversation only, and only when the run commits.
	reset := st.Begin()
	reset.ResetConversation(ctx, c)
	if n, _ := reset.SlotAsks(ctx, c, "k", "to_account"); n != 0 {
		t.Fatalf("reset run sees old asks: %d", n)
	}
	reset.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	if n, _ := st.Begin().SlotAsks(ctx, c, "k", "to_account"); n != 2 {
		t.Fatalf("an uncommitted reset is visible: %d", n)
	}
	commitRun(t, reset, &api.Record{RecordID: "rec_3", Outcome: api.OutcomeAskUser})
	after := st.Begin()
	if n, _ := after.Gate1Counts(ctx, c); n != (gates.Gate1Counts{Intent: 1}) {
		t.Fatalf("after reset: %+v", n)
	}
	if n, _ := after.SlotAsks(ctx, c, "k", "to_account"); n != 0 {
		t.Fatalf("asks survived the reset: %d", n)
	}
	if n, _ := after.SlotAsks(ctx, other, "k", "to_account"); n != 1 {
		t.Fatalf("reset reached another conversation: %d", n)
	}
	if _, ok, _ := after.Question(ctx, "q_1"); !ok {
		t.Fatal("reset dropped question bindings")
	}
}

// Question ids come from callers: any bytes, any length, are looked up and found absent.
func testUnknownQuestions(t *testing.T, _ *store.DB, st Store) {
	ctx := context.Background()
	r := st.Begin()
	for _, id := range []string{"q_unknown", "", "q\x00/../conv", strings.Repeat("q", 1<<20)} {
		if _, ok, err := r.Question(ctx, id); ok || err != nil {
			t.Fatalf("unknown question %.20q: %v %v", id, ok, err)
		}
	}
}

// Receipts can arrive out of order and be replayed: executions are ordered by their record
// ids, not by receipt times (the older one here has the later iat, in the same second), an
// older execution never replaces a newer baseline, the same execution again changes nothing,
// and a newer one replaces the whole of the older (a field the newer call lacks has no prior
// value).
func testBaselines(t *testing.T, _ *store.DB, st Store) {
	ctx := context.Background()
	const key = "u:pay:bank/transfer"
	set := func(iat int64, rec string, vals map[string]json.RawMessage) BaselineResult {
		t.Helper()
		res, err := st.SetBaseline(ctx, key, Baseline{IssuedAt: iat, VerdictID: "j" + rec, RecordID: rec, Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := map[string]json.RawMessage{"to_account": json.RawMessage(`"110-222-333"`), "memo": json.RawMessage(`"rent"`)}
	b := map[string]json.RawMessage{"to_account": json.RawMessage(`"220-555-010"`), "amount": json.RawMessage(`9007199254740993`)}
	for i, step := range []struct {
		iat  int64
		rec  string
		vals map[string]json.RawMessage
		want BaselineResult
	}{
		{100, "rec_01M8NVKFSA0000000000000001", a, BaselineApplied},
		{100, "rec_01M8NVKFSA0000000000000002", b, BaselineApplied},
		{101, "rec_01M8NVKFSA0000000000000001", a, BaselineSuperseded}, // A's receipt replayed after B
		{100, "rec_01M8NVKFSA0000000000000002", b, BaselineCurrent},    // B's again: idempotent
		{99, "rec_01M8NVKFS90000000000000009", a, BaselineSuperseded},  // an earlier millisecond
	} {
		if got := set(step.iat, step.rec, step.vals); got != step.want {
			t.Fatalf("step %d (%s): %s, want %s", i, step.rec, got, step.want)
		}
	}
	r := st.Begin()
	if v, ok, _ := r.PriorValue(ctx, key, "to_account"); !ok || v != "220-555-010" {
		t.Fatalf("to_account: %v %v", v, ok)
	}
	if v, ok, _ := r.PriorValue(ctx, key, "amount"); !ok || v != json.Number("9007199254740993") {
		t.Fatalf("amount keeps its exact text: %#v", v)
	}
	if _, ok, _ := r.PriorValue(ctx, key, "memo"); ok {
		t.Fatal("a newer baseline kept a field the executed call did not have")
	}
	if _, ok, _ := r.PriorValue(ctx, key[:len(key)-1], "to_account"); ok {
		t.Fatal("a prefix of an action key shares its baseline")
	}
}

// The latest deferred run of an action key is what a trigger finds, with its intent.
func testDeferred(t *testing.T, db *store.DB, st Store) {
	ctx := context.Background()
	key := "u_01:send money:bank/schedule_transfer"
	if got, err := st.Deferred(ctx, key); got != nil || err != nil {
		t.Fatalf("nothing deferred yet: %+v %v", got, err)
	}
	for _, id := range []string{"rec_d1", "rec_d2"} {
		r := st.Begin()
		commitRun(t, r, &api.Record{RecordID: id, Outcome: api.OutcomeDeferred, ActionKey: &key, Principal: "u_01",
			Server: "bank", Tool: "schedule_transfer",
			Deferred: &api.DeferredIntent{UserAnswers: []api.Answer{{QuestionID: "q_when"}}}})
	}
	got, err := st.Deferred(ctx, key)
	if err != nil || got == nil || got.RecordID != "rec_d2" || got.Outcome != api.OutcomeDeferred ||
		got.Principal != "u_01" || got.Deferred == nil || len(got.Deferred.UserAnswers) != 1 {
		t.Fatalf("deferred record: %+v %v", got, err)
	}
	if got, err := st.Deferred(ctx, key+"x"); got != nil || err != nil {
		t.Fatalf("unknown action key: %+v %v", got, err)
	}
}

// A counter never goes below zero: the engine's bug must not lift a ceiling.
func testNegativeCounts(t *testing.T, _ *store.DB, st Store) {
	ctx := context.Background()
	c := gates.Conversation{Principal: "u_01"}
	r := st.Begin()
	if err := r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: -1}); err == nil {
		t.Fatal("negative Gate-1 counter accepted")
	}
	if err := r.SetSlotAsks(ctx, c, "k", "s", -1); err == nil {
		t.Fatal("negative ask count accepted")
	}
}

// An occurrence is used up only by a committed run, and of two runs that read the same uses
// only the first commits: the second fails (ErrConflict on the shared store, decided again
// there; ErrUsesMoved on bbolt) and writes nothing, its record included.
func testUses(t *testing.T, db *store.DB, st Store) {
	ctx := context.Background()
	const id = "rec_deferred"
	key := "u_01:send money:bank/schedule_transfer"
	a, b := st.Begin(), st.Begin()
	for _, r := range []Run{a, b} {
		if u, err := r.Uses(ctx, id); err != nil || u != (Uses{}) {
			t.Fatalf("uses before any trigger: %+v %v", u, err)
		}
	}
	uncommitted := st.Begin()
	uncommitted.Uses(ctx, id)
	uncommitted.Consume(id, Uses{Count: 1, LastMillis: 1, LastRecordID: "rec_never"})
	first := Uses{Count: 1, LastMillis: 1_000, LastRecordID: "rec_t1"}
	a.Consume(id, first)
	commitRun(t, a, &api.Record{RecordID: "rec_t1", Outcome: api.OutcomeVerdictIssued, ActionKey: &key})
	if u, err := st.Begin().Uses(ctx, id); err != nil || u != first {
		t.Fatalf("uses after the commit: %+v %v", u, err)
	}

	b.Consume(id, Uses{Count: 1, LastMillis: 2_000, LastRecordID: "rec_t2"})
	err := commit(b, &api.Record{RecordID: "rec_t2", Outcome: api.OutcomeVerdictIssued, ActionKey: &key})
	if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrUsesMoved) {
		t.Fatalf("second consume of the same uses: %v", err)
	}
	if u, _ := st.Begin().Uses(ctx, id); u != first {
		t.Fatalf("uses after the refused commit: %+v", u)
	}
	if _, err := db.Decisions().Get(ctx, "rec_t2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused run's record was stored: %v", err)
	}
}

// A commit stores the run's changes, its record byte for byte and its approval together. One
// whose approval changed since it was read stores neither the record, nor the approval, nor
// any of the run's changes: on etcd the approval's compare is in the transaction of the state.
func testCommitTogether(t *testing.T, db *store.DB, st Store) {
	ctx := context.Background()
	c := gates.Conversation{Principal: "u_01", ID: "c_together"}
	meta := store.ApprovalMeta{ID: "apr_1", Call: "call", Principal: "u_01", Created: time.Unix(1e9, 0), Pending: true}
	count := func(r Run, n int) {
		t.Helper()
		if err := r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: n}); err != nil {
			t.Fatal(err)
		}
	}
	r := st.Begin()
	count(r, 1)
	rec := &api.Record{RecordID: "rec_together", Outcome: api.OutcomeAskUser, Principal: "u_01"}
	if err := commitWith(r, rec, &store.ApprovalWrite{Meta: meta, Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	want, _ := apijson.AppendRecord(nil, rec)
	if got, err := db.Decisions().Get(ctx, rec.RecordID); err != nil || string(got.Record) != string(want) {
		t.Fatalf("stored record %s %v, want %s", got.Record, err, want)
	}
	keeper := keeperOf(st, db)
	if a, err := keeper.Get(ctx, "apr_1"); err != nil || string(a) != "v1" {
		t.Fatalf("stored approval %q %v", a, err)
	}

	stale := st.Begin()
	count(stale, 2)
	err := commitWith(stale, &api.Record{RecordID: "rec_stale", Outcome: api.OutcomeAskUser},
		&store.ApprovalWrite{Meta: meta, Value: []byte("v2"), Prev: []byte("v0")})
	if !errors.Is(err, store.ErrApprovalChanged) {
		t.Fatalf("commit over a changed approval: %v", err)
	}
	if _, err := db.Decisions().Get(ctx, "rec_stale"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused run's record was stored: %v", err)
	}
	if a, _ := keeper.Get(ctx, "apr_1"); string(a) != "v1" {
		t.Fatalf("approval after the refused commit: %q", a)
	}
	if n, err := st.Begin().Gate1Counts(ctx, c); err != nil || n.Intent != 1 {
		t.Fatalf("counts after the refused commit: %+v %v, want 1", n, err)
	}
}

// keeperOf is where st's commits keep approvals: the replica's file, or etcd.
func keeperOf(st Store, db *store.DB) approvals.Keeper {
	if e, ok := st.(*Etcd); ok {
		return e.Approvals()
	}
	return db.Approvals()
}

// TestCommitFaults: a commit that fails at any of its steps stores neither its record nor its
// approval, and none of the run's changes either, but on etcd once they were sent: an ask
// counted, a question bound and a pending approval that no record shows, which err towards
// refusing (the approval is the call's, pending: its next preflight binds it). Each backend
// takes its steps in the one order, and a commit that meets no fault takes them all.
func TestCommitFaults(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			db := openDB(t)
			var failAt string
			var seen []string
			st := b.open(t, db, func(step string) error {
				seen = append(seen, step)
				if step == failAt {
					return errInjected
				}
				return nil
			})
			steps := []string{StepState, StepApproval, StepRecord, StepEnd}
			if _, shared := st.(*Etcd); shared {
				steps[0] = StepSend
			}
			c := gates.Conversation{Principal: "u_01", ID: "c_faults"}
			intents := 0 // the ask counter as stored
			for i, step := range append(slices.Clone(steps), "") {
				failAt, seen = step, nil
				r := st.Begin()
				if n, err := r.Gate1Counts(ctx, c); err != nil || n.Intent != intents {
					t.Fatalf("before the fault at %q: %+v %v, want %d intent asks", step, n, err, intents)
				}
				r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: intents + 1})
				q := fmt.Sprint("q_", i)
				r.SaveQuestion(ctx, q, gates.QuestionBinding{Principal: "u_01", SlotID: "s"})
				id := fmt.Sprint("rec_", i)
				meta := store.ApprovalMeta{ID: fmt.Sprint("apr_", i), Call: "call", Principal: "u_01", Created: time.Unix(1e9, 0), Pending: true}
				err := commitWith(r, &api.Record{RecordID: id, Outcome: api.OutcomeAskUser}, &store.ApprovalWrite{Meta: meta, Value: []byte("v")})
				if step == "" {
					if err != nil || !slices.Equal(seen, steps) {
						t.Fatalf("commit without a fault: %v, steps %v, want %v", err, seen, steps)
					}
					break
				}
				if !errors.Is(err, errInjected) || !slices.Equal(seen, steps[:i+1]) {
					t.Fatalf("fault at %s: %v, steps %v, want %v", step, err, seen, steps[:i+1])
				}
				if _, err := db.Decisions().Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("fault at %s: the record was stored: %v", step, err)
				}
				// On etcd the approval went with the state: kept once it was sent.
				sent := step != StepSend && steps[0] == StepSend
				if a, err := keeperOf(st, db).Get(ctx, meta.ID); (a != nil) != sent || err != nil {
					t.Fatalf("fault at %s: approval stored %q %v, want stored %v", step, a, err, sent)
				}
				if _, bound, err := st.Begin().Question(ctx, q); bound != sent || err != nil {
					t.Fatalf("fault at %s: question bound %v %v, want %v", step, bound, err, sent)
				}
				if sent {
					intents++
				}
			}
		})
	}
}

// errInjected is the failure a Fault option injects.
var errInjected = errors.New("injected fault")

// TestBaselineOrderProperty: receipts of executed verdicts posted in any order, each any number
// of times (late, replayed), leave the newest execution as the baseline, and every answer is
// applied, already_applied or superseded exactly as that order says.
func TestBaselineOrderProperty(t *testing.T) {
	db := openDB(t)
	st, err := NewBolt(context.Background(), db, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		key := fmt.Sprintf("u:pay:bank/transfer#%d", n)
		var ids store.RecordIDs
		base := time.Unix(1_800_000_000, 0)
		recs := make([]string, rapid.IntRange(1, 6).Draw(t, "executions"))
		for i := range recs {
			// Several in one millisecond, as executions within one second are.
			recs[i] = ids.Next("rec_", base.Add(time.Duration(rapid.IntRange(0, 2).Draw(t, "ms"))*time.Millisecond))
		}
		posts := rapid.SliceOfN(rapid.IntRange(0, len(recs)-1), 1, 20).Draw(t, "posts")
		best := ""
		for _, i := range posts {
			want := BaselineSuperseded
			switch {
			case recs[i] > best:
				want, best = BaselineApplied, recs[i]
			case recs[i] == best:
				want = BaselineCurrent
			}
			got, err := st.SetBaseline(context.Background(), key, Baseline{IssuedAt: base.Unix(), VerdictID: "j" + recs[i], RecordID: recs[i],
				Values: map[string]json.RawMessage{"to_account": json.RawMessage(`"` + recs[i] + `"`)}})
			if err != nil || got != want {
				t.Fatalf("post of %s: %v %v, want %v", recs[i], got, err, want)
			}
		}
		if v, ok, err := st.Begin().PriorValue(context.Background(), key, "to_account"); err != nil || !ok || v != best {
			t.Fatalf("baseline %v %v %v, want %s", v, ok, err, best)
		}
	})
}

// TestBoltBaselineReplayCommitsNothing: on bbolt a receipt that changes nothing (the same one
// again, or an older one) is answered from a read: replayed receipts never take the writer.
func TestBoltBaselineReplayCommitsNothing(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	st, err := NewBolt(ctx, db, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const key = "u:pay:bank/transfer"
	vals := map[string]json.RawMessage{"to_account": json.RawMessage(`"110-222-333"`)}
	newer := Baseline{IssuedAt: 100, VerdictID: "j2", RecordID: "rec_01M8NVKFSA0000000000000002", Values: vals}
	older := Baseline{IssuedAt: 100, VerdictID: "j1", RecordID: "rec_01M8NVKFSA0000000000000001", Values: vals}
	if res, err := st.SetBaseline(ctx, key, newer); err != nil || res != BaselineApplied {
		t.Fatalf("%s %v", res, err)
	}
	commits := db.Stats().Commits
	for _, tt := range []struct {
		b    Baseline
		want BaselineResult
	}{{newer, BaselineCurrent}, {older, BaselineSuperseded}} {
		if res, err := st.SetBaseline(ctx, key, tt.b); err != nil || res != tt.want {
			t.Fatalf("%s: %s %v, want %s", tt.b.RecordID, res, err, tt.want)
		}
	}
	if got := db.Stats().Commits; got != commits {
		t.Fatalf("%d commits for receipts that changed nothing", got-commits)
	}
}
