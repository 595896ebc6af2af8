package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
)

func openOutbox(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func readAll(t *testing.T, o *Outbox, after uint64) []OutboxEntry {
	t.Helper()
	es, err := o.Read(context.Background(), after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Every record write appends one entry in its own commit, in commit order, and the entry reads
// back the record as stored when read.
func TestOutboxNotesEveryRecordWrite(t *testing.T) {
	ctx := context.Background()
	db := openOutbox(t, filepath.Join(t.TempDir(), "v.db"))
	appendDecision(t, db.Decisions(), "rec_1", "k", "ask_user", "", t0)
	x := newExecution("jti_1", t0)
	if err := db.Executions().Start(ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Executions().Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "sha256:00", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	refusal := newExecution("jti_2", t0)
	refusal.Reason = "replayed"
	if err := db.Executions().RecordRefusal(ctx, refusal); err != nil {
		t.Fatal(err)
	}
	es := readAll(t, db.Outbox(), 0)
	want := []struct {
		kind byte
		id   string
	}{{OutboxDecision, "rec_1"}, {OutboxExecution, x.RecordID}, {OutboxExecution, x.RecordID}, {OutboxExecution, refusal.RecordID}}
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, w := range want {
		if es[i].Seq != uint64(i+1) || es[i].Kind != w.kind || es[i].RecordID != w.id || len(es[i].Record) == 0 {
			t.Errorf("entry %d = {%d %c %s %d bytes}, want {%d %c %s}", i, es[i].Seq, es[i].Kind, es[i].RecordID, len(es[i].Record), i+1, w.kind, w.id)
		}
	}
	// Both entries of the execution read the record as it is now: finished.
	if got := readAll(t, db.Outbox(), 1); string(got[0].Record) != string(got[1].Record) {
		t.Errorf("the started entry reads %s, the finished one %s", got[0].Record, got[1].Record)
	}
	if last, _ := db.Outbox().Last(ctx); last != 4 {
		t.Errorf("Last = %d, want 4", last)
	}
}

// Without Options.Outbox nothing is noted.
func TestOutboxOffNotesNothing(t *testing.T) {
	db := openTest(t)
	appendDecision(t, db.Decisions(), "rec_1", "k", "ask_user", "", t0)
	if es := readAll(t, db.Outbox(), 0); len(es) != 0 {
		t.Fatalf("%d entries with the outbox off", len(es))
	}
}

// Entries are pruned once every configured sink's cursor has passed them; a configured sink
// that has shipped nothing yet keeps them all; a sink no longer configured loses its cursor.
func TestOutboxAdvanceAndPrune(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v.db")
	db := openOutbox(t, path)
	for i, id := range []string{"rec_1", "rec_2", "rec_3", "rec_4"} {
		appendDecision(t, db.Decisions(), id, "k", "ask_user", "", t0.Add(time.Duration(i)*time.Second))
	}
	o := db.Outbox()
	steps := []struct {
		sink      string
		seq       uint64
		sinks     []string
		remaining int
	}{
		{"a", 2, []string{"a", "b"}, 4}, // b has shipped nothing: nothing pruned
		{"b", 1, []string{"a", "b"}, 3}, // both passed 1
		{"b", 3, []string{"a", "b"}, 2}, // a is at 2
		{"a", 1, []string{"a", "b"}, 2}, // never backwards
		{"a", 4, []string{"a"}, 0},      // b removed from the config: its cursor goes
	}
	for i, s := range steps {
		if err := o.Advance(ctx, s.sink, s.seq, s.sinks); err != nil {
			t.Fatal(err)
		}
		if got := len(readAll(t, o, 0)); got != s.remaining {
			t.Errorf("step %d: %d entries remain, want %d", i, got, s.remaining)
		}
	}
	if c, _ := o.Cursor(ctx, "a"); c != 4 {
		t.Errorf("cursor a = %d, want 4", c)
	}
	if c, _ := o.Cursor(ctx, "b"); c != 0 {
		t.Errorf("cursor b = %d after its removal, want 0", c)
	}
	// The sequence survives a restart: new entries never reuse a pruned number.
	db.Close(ctx)
	db = openOutbox(t, path)
	appendDecision(t, db.Decisions(), "rec_5", "k", "ask_user", "", t0)
	if es := readAll(t, db.Outbox(), 4); len(es) != 1 || es[0].Seq != 5 {
		t.Fatalf("after restart: %+v", es)
	}
}
