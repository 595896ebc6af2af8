package store

import (
	"context"
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
		if err := db.Update(ctx, func(tx *bolt.Tx) error { return a.PutTx(tx, m, []byte("apr_1")) }); err != nil {
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
