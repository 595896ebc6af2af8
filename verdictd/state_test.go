package verdictd

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

func openState(t *testing.T) (*store.DB, *State) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	st, err := NewState(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return db, st
}

func commit(t *testing.T, db *store.DB, rs *RunState) {
	t.Helper()
	if err := db.Update(context.Background(), rs.Commit); err != nil {
		t.Fatal(err)
	}
}

func TestRunStateBuffersUntilCommit(t *testing.T) {
	ctx := context.Background()
	db, st := openState(t)
	c := gates.Conversation{Principal: "u_01", ID: "c1"}
	other := gates.Conversation{Principal: "u_01", ID: "c10"} // shares a textual prefix with c1

	rs := st.Run()
	rs.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1, Tool: 2})
	rs.SetSlotAsks(ctx, c, "k", "to_account", 2)
	rs.SaveQuestion(ctx, "q_1", gates.QuestionBinding{Principal: "u_01", ActionKey: "k", SlotID: "amount",
		Kind: gates.QuestionApproval, Value: json.Number("9007199254740993"), Shown: map[string]any{"amount": json.Number("1.5")}})
	if n, _ := rs.Gate1Counts(ctx, c); n.Tool != 2 {
		t.Fatalf("a run does not see its own write: %+v", n)
	}
	// Nothing reaches the file before Commit.
	if n, _ := st.Run().Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("uncommitted counters visible: %+v", n)
	}
	commit(t, db, rs)

	rs2 := st.Run()
	rs2.SetSlotAsks(ctx, other, "k", "to_account", 1)
	commit(t, db, rs2)

	fresh := st.Run()
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
	reset := st.Run()
	reset.ResetConversation(ctx, c)
	if n, _ := reset.SlotAsks(ctx, c, "k", "to_account"); n != 0 {
		t.Fatalf("reset run sees old asks: %d", n)
	}
	reset.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	commit(t, db, reset)
	after := st.Run()
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

func TestPriorValues(t *testing.T) {
	ctx := context.Background()
	db, st := openState(t)
	put := func(vals map[string]json.RawMessage) {
		if err := db.Update(ctx, func(tx *bolt.Tx) error { return setPriorTx(tx, "u:pay:bank/transfer", vals) }); err != nil {
			t.Fatal(err)
		}
	}
	put(map[string]json.RawMessage{"to_account": json.RawMessage(`"110-222-333"`), "memo": json.RawMessage(`"rent"`)})
	put(map[string]json.RawMessage{"to_account": json.RawMessage(`"220-555-010"`), "amount": json.RawMessage(`123456789012`)})
	if v, ok, _ := st.PriorValue(ctx, "u:pay:bank/transfer", "to_account"); !ok || v != "220-555-010" {
		t.Fatalf("to_account: %v %v", v, ok)
	}
	if v, ok, _ := st.PriorValue(ctx, "u:pay:bank/transfer", "amount"); !ok || v != json.Number("123456789012") {
		t.Fatalf("amount keeps its exact text: %#v", v)
	}
	if _, ok, _ := st.PriorValue(ctx, "u:pay:bank/transfer", "memo"); ok {
		t.Fatal("a newer baseline kept a field the executed call did not have")
	}
	if _, ok, _ := st.PriorValue(ctx, "u:pay:bank/transfe", "to_account"); ok {
		t.Fatal("a prefix of an action key shares its baseline")
	}
}

func TestStateOutsideARunFails(t *testing.T) {
	if _, err := (ctxState{}).Gate1Counts(context.Background(), gates.Conversation{}); err == nil {
		t.Fatal("state read without a run")
	}
	if err := (ctxState{}).SaveQuestion(context.Background(), "q", gates.QuestionBinding{}); err == nil {
		t.Fatal("state write without a run")
	}
}

// TestConvLocksSerializeOneConversation: counters read and written back under the lock never
// lose an increment.
func TestConvLocksSerializeOneConversation(t *testing.T) {
	var locks convLocks
	c := gates.Conversation{Principal: "p", ID: "c"}
	n := 0
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Go(func() {
			unlock, err := locks.lock(context.Background(), c)
			if err != nil {
				t.Error(err)
				return
			}
			v := n
			n = v + 1
			unlock()
		})
	}
	wg.Wait()
	if n != 64 || len(locks.m) != 0 {
		t.Fatalf("n=%d, %d locks left", n, len(locks.m))
	}
}

// TestConvLocksGiveUpAtTheDeadline: a run waiting behind another of its conversation stops
// waiting when its context ends, and leaves the lock as it found it.
func TestConvLocksGiveUpAtTheDeadline(t *testing.T) {
	var locks convLocks
	c := gates.Conversation{Principal: "p", ID: "c"}
	unlock, err := locks.lock(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	errLate := errors.New("deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errLate)
	if _, err := locks.lock(ctx, c); !errors.Is(err, errLate) {
		t.Fatalf("waited past the deadline: %v", err)
	}
	unlock()
	if len(locks.m) != 0 {
		t.Fatalf("%d locks left", len(locks.m))
	}
	unlock, err = locks.lock(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}
