package convstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/store"
)

// testClock is an injected clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Unix(1_800_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ask commits a run that counts one intent ask in c, as a preflight that asked does.
func ask(t *testing.T, st Store, c gates.Conversation) {
	t.Helper()
	ctx := context.Background()
	r := st.Begin()
	n, err := r.Gate1Counts(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	n.Intent++
	if err := r.SetGate1Counts(ctx, c, n); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSlotAsks(ctx, c, "k", "to_account", n.Intent); err != nil {
		t.Fatal(err)
	}
	commitRun(t, r, &api.Record{RecordID: fmt.Sprintf("rec_%s_%s_%d", c.Principal, c.ID, n.Intent), Outcome: api.OutcomeAskUser})
}

// TestConversationLimit: on both backends, a principal holding its most live conversations is
// refused a new one, while its own conversations and other principals' go on; a conversation
// reset to nothing frees its place.
func TestConversationLimit(t *testing.T) {
	ctx := context.Background()
	for _, b := range []backend{
		{"bbolt", func(t *testing.T, db *store.DB, _ func(string) error) Store {
			st, err := NewBolt(ctx, db, BoltOptions{MaxConversations: 3})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"etcd", func(t *testing.T, db *store.DB, _ func(string) error) Store {
			return newTestEtcdOn(t, db, etcdtest.Start(t), EtcdOptions{MaxConversations: 3})
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			db := openDB(t)
			st := b.open(t, db, nil)
			conv := func(p string, i int) gates.Conversation {
				return gates.Conversation{Principal: p, ID: fmt.Sprint("c", i)}
			}
			for i := range 3 {
				if err := st.Admit(ctx, conv("u_01", i)); err != nil {
					t.Fatalf("conversation %d: %v", i, err)
				}
				ask(t, st, conv("u_01", i))
			}
			tests := []struct {
				name string
				c    gates.Conversation
				want error
			}{
				{"a fourth conversation", conv("u_01", 3), ErrConversationLimit},
				{"an existing conversation", conv("u_01", 0), nil},
				{"another principal", conv("u_02", 3), nil},
				// A principal whose name extends another's shares no prefix with it.
				{"a principal named like a prefix", conv("u_0", 3), nil},
				{"a principal named with a quote", conv(`u_01","c0`, 3), nil},
			}
			for _, tc := range tests {
				if err := st.Admit(ctx, tc.c); !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
			}
			ask(t, st, conv("u_01", 0)) // the principal's own conversations keep working
			r := st.Begin()
			if err := r.ResetConversation(ctx, conv("u_01", 1)); err != nil {
				t.Fatal(err)
			}
			commitRun(t, r, &api.Record{RecordID: "rec_reset", Outcome: api.OutcomeAskUser})
			if err := st.Admit(ctx, conv("u_01", 3)); err != nil {
				t.Fatalf("after a reset freed a place: %v", err)
			}
		})
	}
}

// TestBoltConversationLimitAtCommit: two first runs of one principal's new conversations that
// both passed Admit cannot both take its last place: the second commit is refused, and its
// record with it.
func TestBoltConversationLimitAtCommit(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	st, err := NewBolt(ctx, db, BoltOptions{MaxConversations: 2})
	if err != nil {
		t.Fatal(err)
	}
	ask(t, st, gates.Conversation{Principal: "u_01", ID: "c0"})
	var runs []Run
	for _, id := range []string{"c1", "c2"} {
		c := gates.Conversation{Principal: "u_01", ID: id}
		if err := st.Admit(ctx, c); err != nil {
			t.Fatal(err)
		}
		r := st.Begin()
		r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
		runs = append(runs, r)
	}
	commitRun(t, runs[0], &api.Record{RecordID: "rec_c1", Outcome: api.OutcomeAskUser})
	err = commit(runs[1], &api.Record{RecordID: "rec_c2", Outcome: api.OutcomeAskUser})
	if !errors.Is(err, ErrConversationLimit) {
		t.Fatalf("second commit: %v, want ErrConversationLimit", err)
	}
	if _, err := db.Decisions().Get(ctx, "rec_c2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused run's record was stored: %v", err)
	}
	if n, err := st.Begin().Gate1Counts(ctx, gates.Conversation{Principal: "u_01", ID: "c2"}); err != nil || n != (gates.Gate1Counts{}) {
		t.Fatalf("the refused run's counters were stored: %+v %v", n, err)
	}
}

// TestBoltConversationExpiry: a conversation unchanged for the TTL is gone to every run at
// once, whether or not it has been collected; each change starts the TTL again; collection
// forgets its counters, in bounded commits, and frees its place under the principal's bound,
// and leaves question bindings, deferred uses and baselines alone.
func TestBoltConversationExpiry(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clock := newTestClock()
	st, err := NewBolt(ctx, db, BoltOptions{ConversationTTL: time.Hour, MaxConversations: 1, GCBatch: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := gates.Conversation{Principal: "u_01", ID: "c"}
	ask(t, st, c)
	r := st.Begin()
	r.SaveQuestion(ctx, "q_kept", gates.QuestionBinding{Principal: "u_01", SlotID: "to_account"})
	if _, err := r.Uses(ctx, "rec_deferred"); err != nil {
		t.Fatal(err)
	}
	r.Consume("rec_deferred", Uses{Count: 1})
	commitRun(t, r, &api.Record{RecordID: "rec_q", Outcome: api.OutcomeAskUser})
	if _, err := st.SetBaseline(ctx, "k", Baseline{RecordID: "rec_b", Values: nil}); err != nil {
		t.Fatal(err)
	}
	intents := func() int {
		t.Helper()
		n, err := st.Begin().Gate1Counts(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return n.Intent
	}

	clock.Add(59 * time.Minute)
	ask(t, st, c) // a change 59 minutes in: the hour counts from here
	clock.Add(time.Hour - time.Millisecond)
	if got := intents(); got != 2 {
		t.Fatalf("just before the TTL: %d intent asks, want 2", got)
	}
	if err := st.Admit(ctx, gates.Conversation{Principal: "u_01", ID: "other"}); !errors.Is(err, ErrConversationLimit) {
		t.Fatalf("a second conversation while the first lives: %v", err)
	}
	clock.Add(time.Millisecond)
	if got := intents(); got != 0 {
		t.Fatalf("at the TTL, uncollected: %d intent asks, want 0", got)
	}
	if err := st.Admit(ctx, gates.Conversation{Principal: "u_01", ID: "other"}); err != nil {
		t.Fatalf("an expired conversation holds its place: %v", err)
	}
	// A run that writes an expired, uncollected conversation starts it afresh: no value ask
	// count of before survives.
	r = st.Begin()
	r.SetGate1Counts(ctx, c, gates.Gate1Counts{Tool: 1})
	commitRun(t, r, &api.Record{RecordID: "rec_fresh", Outcome: api.OutcomeAskUser})
	if n, _ := st.Begin().SlotAsks(ctx, c, "k", "to_account"); n != 0 {
		t.Fatalf("value asks of the expired conversation survived: %d", n)
	}

	// Five more principals' conversations expire together; collection forgets all six, two
	// per commit.
	for i := range 5 {
		ask(t, st, gates.Conversation{Principal: fmt.Sprint("u_", i+10), ID: "c"})
	}
	clock.Add(time.Hour)
	n, err := st.Collect(ctx)
	if err != nil || n != 6 {
		t.Fatalf("collect: %d %v, want 6", n, err)
	}
	if n, err := st.Collect(ctx); err != nil || n != 0 {
		t.Fatalf("second collect: %d %v, want 0", n, err)
	}
	err = db.View(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketGate1, bucketAsks, bucketTouched, bucketExpiry} {
			if k, _ := tx.Bucket(b).Cursor().First(); k != nil {
				t.Errorf("%s keeps %q after collection", b, k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Begin().Question(ctx, "q_kept"); err != nil || !ok {
		t.Errorf("a question binding was collected: %v %v", ok, err)
	}
	if u, err := st.Begin().Uses(ctx, "rec_deferred"); err != nil || u.Count != 1 {
		t.Errorf("deferred uses were collected: %+v %v", u, err)
	}
	if res, err := st.SetBaseline(ctx, "k", Baseline{RecordID: "rec_b"}); err != nil || res != BaselineCurrent {
		t.Errorf("the baseline was collected: %v %v", res, err)
	}
}

// TestBoltConversationBackfill: conversations stored without a change time get the present
// one when the state is opened, and so expire and count like any other.
func TestBoltConversationBackfill(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	old := gates.Conversation{Principal: "u_01", ID: "old"}
	err := db.Update(ctx, func(tx *bolt.Tx) error {
		g1, err := tx.CreateBucketIfNotExists(bucketGate1)
		if err != nil {
			return err
		}
		asks, err := tx.CreateBucketIfNotExists(bucketAsks)
		if err != nil {
			return err
		}
		if err := g1.Put(convKey(old), make([]byte, 16)); err != nil {
			return err
		}
		return asks.Put(askKey(gates.Conversation{Principal: "u_01", ID: "asks-only"}, "k", "s"), make([]byte, 8))
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := newTestClock()
	st, err := NewBolt(ctx, db, BoltOptions{ConversationTTL: time.Hour, MaxConversations: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Admit(ctx, gates.Conversation{Principal: "u_01", ID: "new"}); !errors.Is(err, ErrConversationLimit) {
		t.Fatalf("stored conversations not counted: %v", err)
	}
	clock.Add(time.Hour)
	if n, err := st.Collect(ctx); err != nil || n != 2 {
		t.Fatalf("collect: %d %v, want 2", n, err)
	}
}

// TestEtcdConversationLease: a conversation and its mark under the principal share a lease of
// the conversation TTL, apart from the TTL of question bindings; when the lease ends (revoked
// here, as its expiry would) the conversation is gone and its place under the bound free.
func TestEtcdConversationLease(t *testing.T) {
	ctx := context.Background()
	st := newTestEtcd(t, etcdtest.Start(t), EtcdOptions{TTL: time.Hour, ConversationTTL: 2 * time.Hour, MaxConversations: 1})
	c := gates.Conversation{Principal: "u_01", ID: "c"}
	r := st.Begin()
	r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	r.SaveQuestion(ctx, "q_1", gates.QuestionBinding{Principal: "u_01"})
	if err := commit(r, &api.Record{Outcome: api.OutcomeAskUser}); err != nil {
		t.Fatal(err)
	}
	lease := func(k string) (clientv3.LeaseID, int64) {
		t.Helper()
		resp, err := st.cli.Get(ctx, k)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
			t.Fatalf("get %s: %v %v", k, resp, err)
		}
		l, err := st.cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease), l.GrantedTTL
	}
	convLease, ttl := lease(st.key(kindConversation, string(convKey(c))))
	if ttl < 7200 || ttl > 7200+7200/24+1 {
		t.Errorf("conversation lease of %ds, want 2h up to one bucket more", ttl)
	}
	if l, _ := lease(st.liveKey(c)); l != convLease {
		t.Errorf("the principal's mark has lease %x, the conversation %x", l, convLease)
	}
	if _, ttl := lease(st.key(kindQuestion, "q_1")); ttl > 3600+3600/24+1 {
		t.Errorf("question lease of %ds, want the 1h TTL", ttl)
	}
	next := gates.Conversation{Principal: "u_01", ID: "next"}
	if err := st.Admit(ctx, next); !errors.Is(err, ErrConversationLimit) {
		t.Fatalf("second conversation: %v", err)
	}
	if _, err := st.cli.Revoke(ctx, convLease); err != nil {
		t.Fatal(err)
	}
	if err := st.Admit(ctx, next); err != nil {
		t.Fatalf("after the conversation's lease ended: %v", err)
	}
	if n, err := st.Begin().Gate1Counts(ctx, c); err != nil || n != (gates.Gate1Counts{}) {
		t.Fatalf("counters after the lease ended: %+v %v", n, err)
	}
}

// BenchmarkBoltAdmit measures the bound's check before a preflight: in a live conversation
// (one lookup), and in a new one of a principal holding bound-1 live conversations (the count
// walks them all).
func BenchmarkBoltAdmit(b *testing.B) {
	const bound = DefaultMaxConversations
	ctx := context.Background()
	db, err := store.Open(b.TempDir()+"/state.db", store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	st, err := NewBolt(ctx, db, BoltOptions{MaxConversations: bound})
	if err != nil {
		b.Fatal(err)
	}
	err = db.Update(ctx, func(tx *bolt.Tx) error {
		for i := range bound - 1 {
			if err := st.touchTx(tx, gates.Conversation{Principal: "u_01", ID: fmt.Sprint("c", i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		c    gates.Conversation
	}{
		{"live", gates.Conversation{Principal: "u_01", ID: "c0"}},
		{"new-at-bound", gates.Conversation{Principal: "u_01", ID: "new"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := st.Admit(ctx, bc.c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
