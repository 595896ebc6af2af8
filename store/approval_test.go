package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestApprovalIndexes: an approval is listed pending while its meta says so, and unused while
// it is approved and not yet used; each update moves it between the lists, never leaving it in
// one it left.
func TestApprovalIndexes(t *testing.T) {
	db := openTest(t)
	a, ctx := db.Approvals(), context.Background()
	created := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	ids := func(vals [][]byte) []string {
		var out []string
		for _, v := range vals {
			out = append(out, string(v))
		}
		slices.Sort(out)
		return out
	}
	for _, step := range []struct {
		name            string
		pending, unused bool
		wantP, wantU    []string
	}{
		{"pending", true, false, []string{"apr_1"}, nil},
		{"approved", false, true, nil, []string{"apr_1"}},
		{"used", false, false, nil, nil},
		{"approved again (a write never seen, for the test)", false, true, nil, []string{"apr_1"}},
	} {
		m := ApprovalMeta{ID: "apr_1", Call: "c", Principal: "p", Created: created, Pending: step.pending, Unused: step.unused}
		if err := db.Update(ctx, func(tx *bolt.Tx) error { return a.putTx(tx, m, []byte("apr_1")) }); err != nil {
			t.Fatal(err)
		}
		p, err := a.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, err := a.Unused(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(p), step.wantP) || !slices.Equal(ids(u), step.wantU) {
			t.Errorf("%s: pending %v unused %v, want %v %v", step.name, ids(p), ids(u), step.wantP, step.wantU)
		}
	}
}

// TestApprovalWrite: an approval is written only while the stored one is the one it was read
// as, and a new one only when Admit takes it, given its principal's pending approvals; a
// refused write leaves the file as it was.
func TestApprovalWrite(t *testing.T) {
	db := openTest(t)
	a, ctx := db.Approvals(), context.Background()
	meta := func(id string) ApprovalMeta {
		return ApprovalMeta{ID: id, Call: "c", Principal: "p", Created: time.Unix(1e9, 0), Pending: true}
	}
	full := errors.New("full")
	admitBelow := func(n int) func([][]byte) error {
		return func(pending [][]byte) error {
			if len(pending) >= n {
				return full
			}
			return nil
		}
	}
	for _, step := range []struct {
		name    string
		w       ApprovalWrite
		wantErr error
		want    string // apr_1's value after the step
	}{
		{"new", ApprovalWrite{Meta: meta("apr_1"), Value: []byte("v1"), Admit: admitBelow(1), Scan: 10}, nil, "v1"},
		{"new again", ApprovalWrite{Meta: meta("apr_1"), Value: []byte("v2")}, ErrApprovalChanged, "v1"},
		{"one pending too many", ApprovalWrite{Meta: meta("apr_2"), Value: []byte("v1"), Admit: admitBelow(1), Scan: 10}, full, "v1"},
		{"stale", ApprovalWrite{Meta: meta("apr_1"), Value: []byte("v3"), Prev: []byte("v0")}, ErrApprovalChanged, "v1"},
		{"as read", ApprovalWrite{Meta: meta("apr_1"), Value: []byte("v2"), Prev: []byte("v1")}, nil, "v2"},
	} {
		err := db.Update(ctx, func(tx *bolt.Tx) error { return a.WriteTx(tx, &step.w) })
		if !errors.Is(err, step.wantErr) || (err != nil) != (step.wantErr != nil) {
			t.Fatalf("%s: %v, want %v", step.name, err, step.wantErr)
		}
		if got, err := a.Get(ctx, "apr_1"); err != nil || string(got) != step.want {
			t.Fatalf("%s: apr_1 is %q %v, want %q", step.name, got, err, step.want)
		}
	}
	if got, _ := a.Get(ctx, "apr_2"); got != nil {
		t.Fatalf("the refused approval was written: %q", got)
	}
}
