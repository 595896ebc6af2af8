package nonce

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// backend opens stores of one kind. open returns a fresh store of the given instance (the
// process that records its consumes; ignored by a store that records them in its own commit)
// over the same backing data as every other store the backend opened.
type backend struct {
	name string
	open func(t *testing.T, instance string) Store
	// endpoint of the etcd the stores share, for looking at what they wrote; "" for bbolt.
	endpoint string
}

func backends(t *testing.T) []backend {
	boltPath := filepath.Join(t.TempDir(), "executor.db")
	var shared *Bolt
	return []backend{
		{name: "bbolt", open: func(t *testing.T, _ string) Store {
			// One file holds one process's store: every open is the same store.
			if shared == nil {
				_, shared = newTestBolt(t, boltPath, newClock(time.Now()))
			}
			return shared
		}},
		etcdBackend(t),
	}
}

func etcdBackend(t *testing.T) backend {
	b := backend{name: "etcd"}
	b.open = func(t *testing.T, instance string) Store {
		if b.endpoint == "" {
			b.endpoint = etcdtest.Start(t)
		}
		return newTestEtcd(t, b.endpoint, EtcdOptions{Owner: "executor-a", Instance: instance, Prefix: "/conformance/"})
	}
	return b
}

// TestConformance runs every backend through the same answers: a first use, a replay, an
// expired or malformed verdict, a closed store.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t, "i1")
			ctx := context.Background()
			exp := time.Now().Add(time.Minute)
			for _, tc := range []struct {
				name    string
				jti     string
				expires time.Time
				want    error
				reason  string
			}{
				{"first use", "c1", exp, nil, ""},
				{"replay", "c1", exp, ErrReplayed, ReasonReplayed},
				{"another jti", "c2", exp, nil, ""},
				{"expired", "c3", time.Now().Add(-time.Minute), ErrExpired, ReasonExpired},
				{"empty jti", "", exp, ErrMalformed, ReasonMalformed},
			} {
				err := s.Consume(ctx, tc.jti, tc.expires)
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) || Reason(err) != tc.reason {
					t.Errorf("%s: %v (reason %q), want %v (reason %q)", tc.name, err, Reason(err), tc.want, tc.reason)
				}
			}
			// Spent looks without consuming: a consumed jti is spent, another is not, and
			// stays consumable.
			for _, tc := range []struct {
				jti  string
				want error
			}{{"c1", ErrReplayed}, {"c2", ErrReplayed}, {"c5", nil}, {"c5", nil}} {
				if err := s.Spent(ctx, tc.jti, exp); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Errorf("Spent(%s): %v, want %v", tc.jti, err, tc.want)
				}
			}
			if err := s.Consume(ctx, "c5", exp); err != nil {
				t.Errorf("c5 after Spent: %v", err)
			}
			if err := s.Spent(ctx, "", exp); !errors.Is(err, ErrMalformed) {
				t.Errorf("Spent of no jti: %v, want malformed", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Consume(ctx, "c4", exp); !errors.Is(err, ErrUnavailable) {
				t.Errorf("after Close: %v, want unavailable", err)
			}
			if err := s.Spent(ctx, "c4", exp); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Spent after Close: %v, want unavailable", err)
			}
		})
	}
}

// TestConformanceReconciler: a store whose consume cannot share the executor's commit is a
// Reconciler, and then it hands over exactly the consumes no live request will start.
func TestConformanceReconciler(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			r, ok := b.open(t, "i1").(Reconciler)
			if _, bolt := b.open(t, "i1").(*Bolt); bolt {
				if ok {
					t.Fatal("the bbolt store consumes in the record's commit and has nothing to reconcile")
				}
				return
			}
			if !ok {
				t.Fatalf("%s cannot share the executor's commit and is not a Reconciler", b.name)
			}
			testReconciler(t, b, r)
		})
	}
}

func testReconciler(t *testing.T, b backend, first Reconciler) {
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	// An earlier run consumed r1 and r2, and crashed; another instance consumed r3.
	for _, jti := range []string{"r1", "r2"} {
		if err := first.Consume(ctx, jti, exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.open(t, "other").Consume(ctx, "r3", exp); err != nil {
		t.Fatal(err)
	}

	// The next run of the instance fences the earlier one out, and lists its consumes only.
	next := b.open(t, "i1").(Reconciler)
	if err := next.Consume(ctx, "r4", exp); err != nil {
		t.Fatal(err)
	}
	if err := first.Consume(ctx, "r5", exp); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrSuperseded) {
		t.Fatalf("a consume of the superseded run: %v, want unavailable (superseded)", err)
	}
	got := map[string]Orphan{}
	if err := next.EarlierRuns(ctx, func(o Orphan) error { got[o.JTI] = o; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["r1"].JTI == "" || got["r2"].JTI == "" || got["r1"].Marked {
		t.Fatalf("earlier runs: %+v, want r1 and r2 unmarked", got)
	}
	if !got["r1"].Expires.Equal(time.Unix(expSeconds(exp), 0)) {
		t.Errorf("r1 expires %v, want %v", got["r1"].Expires, exp)
	}
	if err := next.MarkNotStarted(ctx, got["r1"]); err != nil {
		t.Fatal(err)
	}
	// Marking again, from a stale read, is a no-op.
	if err := next.MarkNotStarted(ctx, got["r1"]); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	// Any store of the deployment now answers r1 as never started, r2 as a replay.
	other := b.open(t, "other")
	for jti, want := range map[string]error{"r1": ErrConsumedNotStarted, "r2": ErrReplayed} {
		err := other.Consume(ctx, jti, exp)
		if !errors.Is(err, want) {
			t.Errorf("Consume(%s) = %v, want %v", jti, err, want)
		}
	}
	if err := other.Consume(ctx, "r1", exp); errors.Is(err, ErrReplayed) || Reason(err) != api.ExecutionReasonConsumedNotStarted {
		t.Errorf("r1 answers %v (reason %q): it must not read as a replay", err, Reason(err))
	}
	again := map[string]bool{}
	if err := next.EarlierRuns(ctx, func(o Orphan) error { again[o.JTI] = o.Marked; return nil }); err != nil {
		t.Fatal(err)
	}
	if !again["r1"] || again["r2"] {
		t.Errorf("after marking r1: %v", again)
	}

	// A consume this run abandoned after it succeeded is handed over; nothing else is.
	next.Abandon("r4", exp)
	var settled []Orphan
	left, err := next.Settle(ctx, func(o Orphan) error { settled = append(settled, o); return nil })
	if err != nil || left != 0 || len(settled) != 1 || settled[0].JTI != "r4" || settled[0].Marked {
		t.Fatalf("Settle = %d, %v, %+v; want r4, unmarked", left, err, settled)
	}
	if next.Pending() != 0 {
		t.Errorf("%d pending after Settle", next.Pending())
	}
}

// TestEtcdSettleUnanswered: a consume whose answer was lost is settled by the key alone,
// whichever way the lost transaction went — never by timing.
func TestEtcdSettleUnanswered(t *testing.T) {
	ep := etcdtest.Start(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	e := newTestEtcd(t, ep, EtcdOptions{Owner: "executor-a", Instance: "i1"})
	cli := rawClient(t, ep)

	// lost: the transaction never took effect; the key is absent, so Settle fences it.
	e.addPending("lost", expSeconds(exp), 101)
	// late: etcd applied the transaction after its answer timed out (written here as the
	// store writes it).
	e.addPending("late", expSeconds(exp), 102)
	if err := e.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	late, _ := json.Marshal(consumed{At: time.Now().UTC(), Exp: expSeconds(exp), By: "executor-a", Instance: "i1", Run: e.run, Attempt: 102})
	if _, err := cli.Put(ctx, e.Key("late"), string(late)); err != nil {
		t.Fatal(err)
	}
	// retried: the lost transaction never took effect and another request of this same
	// process consumed the verdict since, and is about to start it: it is not handed over.
	e.addPending("retried", expSeconds(exp), 103)
	if err := e.Consume(ctx, "retried", exp); err != nil {
		t.Fatal(err)
	}
	// twice: the verdict was sent again while the first attempt was unanswered, the second
	// went unanswered too, and it is the first that committed late: still this run's.
	e.addPending("twice", expSeconds(exp), 105)
	e.addPending("twice", expSeconds(exp), 106)
	twice, _ := json.Marshal(consumed{At: time.Now().UTC(), Exp: expSeconds(exp), By: "executor-a", Instance: "i1", Run: e.run, Attempt: 105})
	if _, err := cli.Put(ctx, e.Key("twice"), string(twice)); err != nil {
		t.Fatal(err)
	}
	// elsewhere: another executor consumed it: its own to account for.
	e.addPending("elsewhere", expSeconds(exp), 104)
	if err := newTestEtcd(t, ep, EtcdOptions{Instance: "i2"}).Consume(ctx, "elsewhere", exp); err != nil {
		t.Fatal(err)
	}

	got := map[string]Orphan{}
	left, err := e.Settle(ctx, func(o Orphan) error {
		got[o.JTI] = o
		return e.MarkNotStarted(ctx, o)
	})
	if err != nil || left != 0 {
		t.Fatalf("Settle = %d, %v", left, err)
	}
	if len(got) != 3 || !got["lost"].Marked || got["late"].JTI == "" || got["late"].Marked || got["twice"].JTI == "" {
		t.Fatalf("handed over %+v; want lost (fenced, marked), late and twice (unmarked)", got)
	}
	for jti, want := range map[string]error{
		"lost": ErrConsumedNotStarted, "late": ErrConsumedNotStarted, "twice": ErrConsumedNotStarted, "retried": ErrReplayed, "elsewhere": ErrReplayed,
	} {
		if err := e.Consume(ctx, jti, exp); !errors.Is(err, want) {
			t.Errorf("Consume(%s) = %v, want %v", jti, err, want)
		}
	}
}

// TestEtcdSettleWaitsForTheStore: with the store unreachable an unanswered consume stays
// pending, and it is settled once the store answers again.
func TestEtcdSettleWaitsForTheStore(t *testing.T) {
	srv := etcdtest.NewServer(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	e := newTestEtcd(t, srv.Endpoint, EtcdOptions{Instance: "i1", RequestTimeout: 300 * time.Millisecond})
	if err := e.Consume(ctx, "warm", exp); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := e.Consume(ctx, "down", exp); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Consume with etcd down = %v", err)
	}
	if e.Pending() != 1 {
		t.Fatalf("%d pending, want the unanswered consume", e.Pending())
	}
	none := func(Orphan) error { t.Error("handed over with etcd down"); return nil }
	if left, err := e.Settle(ctx, none); left != 1 || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Settle with etcd down = %d, %v", left, err)
	}
	srv.Restart()
	var got []string
	var err error
	for range 50 { // the client reconnects by itself; the first attempts may meet the old connection
		var left int
		if left, err = e.Settle(ctx, func(o Orphan) error { got = append(got, o.JTI); return nil }); left == 0 {
			break
		}
	}
	if err != nil || len(got) != 1 || got[0] != "down" {
		t.Fatalf("after restart: %v, %v", got, err)
	}
	if err := e.Consume(ctx, "down", exp); !errors.Is(err, ErrConsumedNotStarted) {
		t.Fatalf("Consume(down) = %v, want consumed_not_started", err)
	}
}

// TestEtcdConsumeOwnAttempt: a transaction the client sent again after its first answer was
// lost finds the key its first sending created — this very attempt's — and is the consume
// that succeeded, not a replay: answering replayed would leave the verdict consumed with no
// record and nothing pending to settle it. Another attempt's key is a replay as before.
func TestEtcdConsumeOwnAttempt(t *testing.T) {
	ep := etcdtest.Start(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	e := newTestEtcd(t, ep, EtcdOptions{Owner: "executor-a", Instance: "i1"})
	if err := e.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	cli := rawClient(t, ep)
	put := func(jti string, attempt uint64) {
		t.Helper()
		v, _ := json.Marshal(consumed{At: time.Now().UTC(), Exp: expSeconds(exp), By: "executor-a", Instance: "i1", Run: e.run, Attempt: attempt})
		if _, err := cli.Put(ctx, e.Key(jti), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	// The next attempt is e.attempt+1: its key is already there, as its first sending left it.
	put("resent", e.attempt.Load()+1)
	if err := e.Consume(ctx, "resent", exp); err != nil {
		t.Fatalf("own attempt: %v, want the consume to stand", err)
	}
	put("other", e.attempt.Load()) // an earlier attempt of this run: another request's
	if err := e.Consume(ctx, "other", exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("another attempt's key: %v, want replayed", err)
	}
}
