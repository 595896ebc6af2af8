package convstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/store"
)

// The keepers of both backends satisfy the approvals package's interface.
var (
	_ approvals.Keeper = (*store.Approvals)(nil)
	_ approvals.Keeper = (*EtcdApprovals)(nil)
)

// apr is an approval as these tests write it: its value says its id and state, which is all
// a keeper must give back (it holds values it does not read).
type apr struct {
	id, call, principal string
	created             int // seconds
	state               string
	used                bool
}

func (a apr) meta() store.ApprovalMeta {
	return store.ApprovalMeta{ID: a.id, Call: a.call, Principal: a.principal, Created: time.Unix(1e9+int64(a.created), 0),
		Pending: a.state == api.ApprovalPending, Unused: a.state == api.ApprovalApproved && !a.used}
}

func (a apr) value() []byte { return fmt.Appendf(nil, "%s:%s:%v", a.id, a.state, a.used) }

// create writes a new approval by the commit of a record, as a preflight does.
func create(t *testing.T, st Store, a apr, admit func([][]byte) error) error {
	t.Helper()
	return commitWith(st.Begin(), &api.Record{Outcome: api.OutcomeAskUser, Principal: a.principal},
		&store.ApprovalWrite{Meta: a.meta(), Value: a.value(), Admit: admit, Scan: 100})
}

// moveTo writes a in state next as a compare and set on a as stored, as a decision does.
func moveTo(ctx context.Context, k approvals.Keeper, a apr, next string, used bool) (apr, error) {
	b := a
	b.state, b.used = next, used
	return b, k.Write(ctx, &store.ApprovalWrite{Meta: b.meta(), Value: b.value(), Prev: a.value()})
}

func strs(vals [][]byte) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

func sorted(vals [][]byte) []string {
	out := strs(vals)
	slices.Sort(out)
	return out
}

// TestKeeperConformance runs one table on both backends' keepers: what a commit and a write
// store, what each read returns and in which order, the compare and set, the bound a commit's
// Admit enforces, and that of racing decisions on one approval exactly one is stored.
func TestKeeperConformance(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			db := openDB(t)
			st := b.open(t, db, nil)
			k := keeperOf(st, db)
			for _, tc := range []struct {
				name string
				run  func(t *testing.T, k approvals.Keeper)
			}{
				{"reads", func(t *testing.T, k approvals.Keeper) {
					a1 := apr{"apr_r1", "call-r", "u_r", 1, api.ApprovalPending, false}
					a2 := apr{"apr_r2", "call-r", "u_r", 2, api.ApprovalPending, false}
					a3 := apr{"apr_r3", "call-r2", "u_r2", 3, api.ApprovalPending, false}
					for _, a := range []apr{a1, a2, a3} {
						if err := create(t, st, a, nil); err != nil {
							t.Fatal(err)
						}
					}
					if v, err := k.Get(ctx, "apr_r2"); err != nil || string(v) != string(a2.value()) {
						t.Fatalf("Get: %q %v", v, err)
					}
					if v, err := k.Get(ctx, "apr_none"); err != nil || v != nil {
						t.Fatalf("Get of an unknown id: %q %v", v, err)
					}
					if v, err := k.ByCall(ctx, "call-r", 10); err != nil || !slices.Equal(strs(v), []string{string(a2.value()), string(a1.value())}) {
						t.Fatalf("ByCall: %q %v, want newest first", v, err)
					}
					if v, err := k.ByCall(ctx, "call-r", 1); err != nil || !slices.Equal(strs(v), []string{string(a2.value())}) {
						t.Fatalf("ByCall limit 1: %q %v", v, err)
					}
					if v, err := k.PendingOf(ctx, "u_r", 10); err != nil || !slices.Equal(sorted(v), []string{string(a1.value()), string(a2.value())}) {
						t.Fatalf("PendingOf: %q %v", v, err)
					}
					// a2 approved: no longer pending, unused until used.
					a2, err := moveTo(ctx, k, a2, api.ApprovalApproved, false)
					if err != nil {
						t.Fatal(err)
					}
					if v, err := k.PendingOf(ctx, "u_r", 10); err != nil || !slices.Equal(strs(v), []string{string(a1.value())}) {
						t.Fatalf("PendingOf after the decision: %q %v", v, err)
					}
					if v, err := k.Unused(ctx); err != nil || !slices.Contains(strs(v), string(a2.value())) || len(v) != 1 {
						t.Fatalf("Unused: %q %v", v, err)
					}
					all := func(value []byte) bool { return true }
					if v, err := k.Newest(ctx, 10, false, all); err != nil || !slices.Equal(strs(v)[:3],
						[]string{string(a3.value()), string(a2.value()), string(a1.value())}) {
						t.Fatalf("Newest: %q %v", v, err)
					}
					if v, err := k.Newest(ctx, 10, true, all); err != nil || !slices.Equal(strs(v)[:2],
						[]string{string(a3.value()), string(a1.value())}) {
						t.Fatalf("Newest pending: %q %v", v, err)
					}
					only1 := func(value []byte) bool { return string(value) == string(a1.value()) }
					if v, err := k.Newest(ctx, 10, false, only1); err != nil || !slices.Equal(strs(v), []string{string(a1.value())}) {
						t.Fatalf("Newest kept: %q %v", v, err)
					}
					// a2 used: neither pending nor unused.
					if _, err := moveTo(ctx, k, a2, api.ApprovalApproved, true); err != nil {
						t.Fatal(err)
					}
					if v, err := k.Unused(ctx); err != nil || len(v) != 0 {
						t.Fatalf("Unused once used: %q %v", v, err)
					}
					if v, err := k.Pending(ctx); err != nil || !slices.Equal(sorted(v), []string{string(a1.value()), string(a3.value())}) {
						t.Fatalf("Pending: %q %v", v, err)
					}
				}},
				{"compare and set", func(t *testing.T, k approvals.Keeper) {
					a := apr{"apr_c1", "call-c", "u_c", 1, api.ApprovalPending, false}
					if err := create(t, st, a, nil); err != nil {
						t.Fatal(err)
					}
					if err := create(t, st, a, nil); !errors.Is(err, store.ErrApprovalChanged) {
						t.Fatalf("a second new approval of the same id: %v", err)
					}
					stale := a
					stale.state = api.ApprovalDenied
					if _, err := moveTo(ctx, k, stale, api.ApprovalApproved, false); !errors.Is(err, store.ErrApprovalChanged) {
						t.Fatalf("a write over another value: %v", err)
					}
					// Ten decisions read the same pending approval: one is stored.
					var wg sync.WaitGroup
					errs := make([]error, 10)
					for i := range errs {
						wg.Go(func() {
							next := api.ApprovalApproved
							if i%2 == 1 {
								next = api.ApprovalDenied
							}
							_, errs[i] = moveTo(ctx, k, a, next, false)
						})
					}
					wg.Wait()
					won := 0
					for _, err := range errs {
						switch {
						case err == nil:
							won++
						case !errors.Is(err, store.ErrApprovalChanged):
							t.Fatalf("a racing decision: %v", err)
						}
					}
					if won != 1 {
						t.Fatalf("%d racing decisions stored, want 1", won)
					}
					// The used approval, by a record's commit, as a preflight uses it.
					v, _ := k.Get(ctx, a.id)
					cur := a
					cur.state = string(v[len(a.id)+1 : len(v)-len(":false")])
					used := cur
					used.used = true
					err := commitWith(st.Begin(), &api.Record{Outcome: api.OutcomeVerdictIssued},
						&store.ApprovalWrite{Meta: used.meta(), Value: used.value(), Prev: cur.value()})
					if err != nil {
						t.Fatal(err)
					}
					err = commitWith(st.Begin(), &api.Record{Outcome: api.OutcomeVerdictIssued},
						&store.ApprovalWrite{Meta: used.meta(), Value: used.value(), Prev: cur.value()})
					if !errors.Is(err, store.ErrApprovalChanged) {
						t.Fatalf("a second use: %v", err)
					}
				}},
				{"admit", func(t *testing.T, k approvals.Keeper) {
					errFull := errors.New("full")
					admit := func(pending [][]byte) error {
						if len(pending) >= 2 {
							return errFull
						}
						return nil
					}
					a1 := apr{"apr_a1", "call-a", "u_a", 1, api.ApprovalPending, false}
					a2 := apr{"apr_a2", "call-a", "u_a", 2, api.ApprovalPending, false}
					a3 := apr{"apr_a3", "call-a", "u_a", 3, api.ApprovalPending, false}
					for _, a := range []apr{a1, a2} {
						if err := create(t, st, a, admit); err != nil {
							t.Fatal(err)
						}
					}
					if err := create(t, st, a3, admit); !errors.Is(err, errFull) {
						t.Fatalf("one approval too many: %v", err)
					}
					if v, _ := k.Get(ctx, a3.id); v != nil {
						t.Fatalf("the refused approval was stored: %q", v)
					}
					if _, err := moveTo(ctx, k, a1, api.ApprovalDenied, false); err != nil {
						t.Fatal(err)
					}
					if err := create(t, st, a3, admit); err != nil {
						t.Fatalf("once one was decided: %v", err)
					}
				}},
			} {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, k) })
			}
		})
	}
}

// TestEtcdApprovalsReplicas: two replicas' keepers on one etcd are one: an approval created by
// a commit on one is decided on the other and used once; a watch on one wakes at a change
// made by the other, and again (to read afresh) when etcd compacted what it had not seen; a
// claim is taken by one replica only.
func TestEtcdApprovalsReplicas(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	r1 := newTestEtcd(t, endpoint, EtcdOptions{Prefix: "/replicas/"})
	r2 := newTestEtcd(t, endpoint, EtcdOptions{Prefix: "/replicas/"})
	k1, k2 := r1.Approvals(), r2.Approvals()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	revision := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	// Replica 2 watches from the revision after the present, so that it sees what replica 1
	// does next whenever its watch reaches etcd.
	changes := make(chan struct{}, 64)
	watching := make(chan error, 1)
	watch := func(from int64) context.CancelFunc {
		wctx, stop := context.WithCancel(ctx)
		go func() {
			watching <- k2.watchFrom(wctx, from, func() {
				select {
				case changes <- struct{}{}:
				default: // one untaken is enough to wake
				}
			})
		}()
		return func() {
			stop()
			if err := <-watching; err != nil {
				t.Errorf("watch: %v", err)
			}
			drain(changes)
		}
	}
	stop := watch(revision() + 1)
	a := apr{"apr_x", "call-x", "u_x", 1, api.ApprovalPending, false}
	if err := create(t, r1, a, nil); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes)
	decided, err := moveTo(ctx, k2, a, api.ApprovalApproved, false)
	if err != nil {
		t.Fatal(err)
	}
	used := decided
	used.used = true
	use := func(st Store) error {
		return commitWith(st.Begin(), &api.Record{Outcome: api.OutcomeVerdictIssued},
			&store.ApprovalWrite{Meta: used.meta(), Value: used.value(), Prev: decided.value()})
	}
	if err := use(r1); err != nil {
		t.Fatalf("use on replica 1: %v", err)
	}
	waitChange(t, changes)
	if err := use(r2); !errors.Is(err, store.ErrApprovalChanged) {
		t.Fatalf("a second use on replica 2: %v", err)
	}
	if v, err := k2.Get(ctx, a.id); err != nil || string(v) != string(used.value()) {
		t.Fatalf("on replica 2: %q %v", v, err)
	}

	// A watch resumed from a revision etcd compacted since: it wakes its waiters, to read
	// afresh what it missed.
	stop()
	rev := revision()
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	stop = watch(rev - 1)
	waitChange(t, changes)
	stop()

	for i, k := range []*EtcdApprovals{k1, k2} {
		won, err := k.Claim(ctx, "webhook/apr_x", time.Hour)
		if err != nil || won != (i == 0) {
			t.Fatalf("claim by replica %d: %v %v", i+1, won, err)
		}
	}
}

// waitChange waits for the watch to tell of a change.
func waitChange(t *testing.T, changes <-chan struct{}) {
	t.Helper()
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("no change told by the watch")
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
