package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func decisionJSON(id, key, outcome, verdictID string, at time.Time) []byte {
	v := "null"
	if verdictID != "" {
		v = fmt.Sprintf("%q", verdictID)
	}
	return fmt.Appendf(nil, `{
  "record_id": %q, "action_key": %q, "outcome": %q, "verdict_id": %s,
  "timestamp": %q, "call_arguments": {"amount": 500000, "to_account": "110-222-333"}
}`, id, key, outcome, v, at.Format(time.RFC3339Nano))
}

func appendDecision(t *testing.T, d *Decisions, id, key, outcome, verdictID string, at time.Time) {
	t.Helper()
	meta := DecisionMeta{RecordID: id, ActionKey: key, Outcome: outcome, VerdictID: verdictID, Time: at}
	if err := d.Append(context.Background(), meta, decisionJSON(id, key, outcome, verdictID, at)); err != nil {
		t.Fatal(err)
	}
}

func TestDecisionsAppendAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.db")
	db := openPath(t, path)
	ctx := context.Background()
	d := db.Decisions()

	appendDecision(t, d, "rec_1", "u_01:pay:bank/transfer", "ask_user", "", t0)
	appendDecision(t, d, "rec_2", "u_01:pay:bank/transfer", "verdict_issued", "jti_1", t0.Add(time.Second))
	// "u_01:pa" is a prefix of the key above: it must not match it.
	appendDecision(t, d, "rec_3", "u_01:pa", "hold", "", t0.Add(2*time.Second))
	appendDecision(t, d, "rec_4", "", "ask_user", "", t0.Add(3*time.Second))

	for name, tc := range map[string]struct {
		meta DecisionMeta
		rec  string
		want error
	}{
		"duplicate id":      {DecisionMeta{RecordID: "rec_1", Outcome: "hold", Time: t0}, `{}`, ErrExists},
		"verdict id reused": {DecisionMeta{RecordID: "rec_9", Outcome: "verdict_issued", VerdictID: "jti_1", Time: t0}, `{}`, ErrExists},
		"not an object":     {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, `[1]`, ErrInvalid},
		"invalid JSON":      {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, `{"a":`, ErrInvalid},
		"two values":        {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, `{} {}`, ErrInvalid},
		"no id":             {DecisionMeta{Outcome: "hold", Time: t0}, `{}`, ErrInvalid},
		"no time":           {DecisionMeta{RecordID: "rec_9", Outcome: "hold"}, `{}`, ErrInvalid},
		"no outcome":        {DecisionMeta{RecordID: "rec_9", Time: t0}, `{}`, ErrInvalid},
	} {
		if err := d.Append(ctx, tc.meta, []byte(tc.rec)); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if _, err := d.Get(ctx, "rec_9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused append left a record: %v", err)
	}

	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db = openPath(t, path)
	d = db.Decisions()

	got, err := d.Get(ctx, "rec_2")
	if err != nil {
		t.Fatal(err)
	}
	want := DecisionMeta{RecordID: "rec_2", ActionKey: "u_01:pay:bank/transfer", Outcome: "verdict_issued", VerdictID: "jti_1", Time: t0.Add(time.Second)}
	if got.DecisionMeta != want {
		t.Fatalf("meta: got %+v, want %+v", got.DecisionMeta, want)
	}
	if string(got.Record) != string(compact(t, decisionJSON("rec_2", want.ActionKey, want.Outcome, "jti_1", want.Time))) {
		t.Fatalf("record: %s", got.Record)
	}
	if v, err := d.ByVerdict(ctx, "jti_1"); err != nil || v.RecordID != "rec_2" {
		t.Fatalf("ByVerdict: %+v, %v", v, err)
	}
	if _, err := d.ByVerdict(ctx, "jti_2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ByVerdict of unknown jti: %v", err)
	}

	ids := func(walk func(fn func(*Decision) error) error) string {
		var out string
		if err := walk(func(d *Decision) error { out += d.RecordID + " "; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, tc := range map[string]struct {
		walk func(fn func(*Decision) error) error
		want string
	}{
		"by key":       {func(fn func(*Decision) error) error { return d.ByActionKey(ctx, "u_01:pay:bank/transfer", fn) }, "rec_1 rec_2 "},
		"by short key": {func(fn func(*Decision) error) error { return d.ByActionKey(ctx, "u_01:pa", fn) }, "rec_3 "},
		"unkeyed":      {func(fn func(*Decision) error) error { return d.ByActionKey(ctx, "", fn) }, "rec_4 "},
		"since":        {func(fn func(*Decision) error) error { return d.Since(ctx, t0.Add(time.Second), fn) }, "rec_2 rec_3 rec_4 "},
		// Past the years an int64 of nanoseconds holds: clamped, not wrapped around.
		"since 2999": {func(fn func(*Decision) error) error {
			return d.Since(ctx, time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), fn)
		}, ""},
		"since 1600": {func(fn func(*Decision) error) error {
			return d.Since(ctx, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), fn)
		}, "rec_1 rec_2 rec_3 rec_4 "},
	} {
		if got := ids(tc.walk); got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

// Iteration crosses chunk boundaries, keeps time order, and stops at fn's error.
func TestDecisionsIterateManyChunks(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	d := db.Decisions()
	const n = 3*scanChunk + 7
	for i := range n {
		// Appended out of time order: iteration order comes from the index, not insertion.
		at := t0.Add(time.Duration((i*7919)%n) * time.Millisecond)
		appendDecision(t, d, fmt.Sprintf("rec_%05d", i), "k", "hold", "", at)
	}
	var prev time.Time
	count := 0
	if err := d.ByActionKey(ctx, "k", func(r *Decision) error {
		if r.Time.Before(prev) {
			t.Fatalf("out of order: %v after %v", r.Time, prev)
		}
		prev = r.Time
		count++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("visited %d of %d", count, n)
	}
	stop := errors.New("stop")
	count = 0
	err := d.Since(ctx, time.Time{}, func(*Decision) error {
		if count++; count == scanChunk+1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || count != scanChunk+1 {
		t.Fatalf("Since did not stop: %v after %d", err, count)
	}
}

func TestAppendEncodedTxRefusesUnencoded(t *testing.T) {
	db := openPath(t, filepath.Join(t.TempDir(), "verdict.db"))
	err := db.Update(context.Background(), func(tx *bolt.Tx) error {
		return db.Decisions().AppendEncodedTx(tx, EncodedDecision{})
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero EncodedDecision: %v", err)
	}
}

// A record written in place by EncodeDecisionWith is stored exactly like one handed to
// AppendTx, and the returned record is those bytes.
func TestEncodeDecisionWith(t *testing.T) {
	db := openPath(t, filepath.Join(t.TempDir(), "verdict.db"))
	ctx := context.Background()
	d := db.Decisions()
	meta := DecisionMeta{RecordID: "rec_1", ActionKey: "k", Outcome: "verdict_issued", VerdictID: "jti_1", Time: t0}
	record := string(compact(t, decisionJSON("rec_1", "k", "verdict_issued", "jti_1", t0)))
	appendRecord := func(s string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) { return append(b, s...), nil }
	}
	enc, out, err := EncodeDecisionWith(meta, 10, appendRecord(record))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != record {
		t.Fatalf("returned record %s", out)
	}
	want, err := encodeDecision(meta, []byte(record))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc.val, want) {
		t.Fatalf("stored value differs from AppendTx's\n got %q\nwant %q", enc.val, want)
	}
	if err := db.Update(ctx, func(tx *bolt.Tx) error { return d.AppendEncodedTx(tx, enc) }); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(ctx, "rec_1")
	if err != nil || got.DecisionMeta != meta || string(got.Record) != record {
		t.Fatalf("Get: %+v %s, %v", got, got.Record, err)
	}

	failed := errors.New("encoder failed")
	for name, tc := range map[string]struct {
		meta   DecisionMeta
		encode func([]byte) ([]byte, error)
		want   error
	}{
		"no id":          {DecisionMeta{Outcome: "hold", Time: t0}, appendRecord(`{}`), ErrInvalid},
		"no time":        {DecisionMeta{RecordID: "rec_9", Outcome: "hold"}, appendRecord(`{}`), ErrInvalid},
		"no outcome":     {DecisionMeta{RecordID: "rec_9", Time: t0}, appendRecord(`{}`), ErrInvalid},
		"encoder error":  {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, func(b []byte) ([]byte, error) { return b, failed }, failed},
		"nothing":        {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, appendRecord(``), ErrInvalid},
		"not an object":  {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, appendRecord(`[1]`), ErrInvalid},
		"unterminated":   {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, appendRecord(`{"a":1`), ErrInvalid},
		"two lines":      {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, appendRecord("{\n}"), ErrInvalid},
		"carriage":       {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, appendRecord("{\r}"), ErrInvalid},
		"dropped header": {DecisionMeta{RecordID: "rec_9", Outcome: "hold", Time: t0}, func([]byte) ([]byte, error) { return nil, nil }, ErrInvalid},
	} {
		if enc, out, err := EncodeDecisionWith(tc.meta, 0, tc.encode); !errors.Is(err, tc.want) || enc.val != nil || out != nil {
			t.Errorf("%s: got %v (%d bytes), want %v", name, err, len(enc.val), tc.want)
		}
	}
}
