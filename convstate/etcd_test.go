package convstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/store"
)

// newTestEtcd is the state at endpoint of a replica whose records are in a file of their own.
func newTestEtcd(t testing.TB, endpoint string, opts EtcdOptions) *Etcd {
	t.Helper()
	return newTestEtcdOn(t, openDB(t), endpoint, opts)
}

// newTestEtcdOn is the state at endpoint of a replica whose records are in db.
func newTestEtcdOn(t testing.TB, db *store.DB, endpoint string, opts EtcdOptions) *Etcd {
	t.Helper()
	opts.Endpoints = []string{endpoint}
	if opts.Prefix == "" {
		opts.Prefix = "/test/"
	}
	if opts.RequestTimeout == 0 {
		// Long enough that a slow etcd on a loaded machine is never a failure; a test of an
		// outage sets its own.
		opts.RequestTimeout = 30 * time.Second
	}
	st, err := NewEtcd(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestEtcdRunCommit pins the etcd run state: reads see etcd plus the run's own writes, nothing
// reaches etcd before Commit, and a commit over a conversation another run changed since it
// was read is a conflict, so two replicas never both count from one value.
func TestEtcdRunCommit(t *testing.T) {
	ctx := context.Background()
	st := newTestEtcd(t, etcdtest.Start(t), EtcdOptions{})
	c := gates.Conversation{Principal: "u_01", ID: "c1"}
	other := gates.Conversation{Principal: "u_01", ID: "c10"}
	rec := &api.Record{Outcome: api.OutcomeAskUser}

	r1 := st.Begin()
	if n, err := r1.Gate1Counts(ctx, c); err != nil || n != (gates.Gate1Counts{}) {
		t.Fatalf("fresh conversation: %+v %v", n, err)
	}
	r1.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	r1.SetSlotAsks(ctx, c, "k", "to_account", 2)
	r1.SaveQuestion(ctx, "q_1", gates.QuestionBinding{Principal: "u_01", ActionKey: "k", SlotID: "amount",
		Kind: api.QuestionApproval, Value: json.Number("9007199254740993")})
	if n, _ := r1.Gate1Counts(ctx, c); n.Intent != 1 {
		t.Fatalf("a run does not see its own write: %+v", n)
	}
	if n, _ := st.Begin().Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("uncommitted counters visible: %+v", n)
	}
	if _, ok, _ := st.Begin().Question(ctx, "q_1"); ok {
		t.Fatal("uncommitted question visible")
	}

	// A second run reads the same conversation before the first commits.
	r2 := st.Begin()
	if _, err := r2.Gate1Counts(ctx, c); err != nil {
		t.Fatal(err)
	}
	r2.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	if err := commit(r1, rec); err != nil {
		t.Fatal(err)
	}
	if err := commit(r2, rec); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit over a changed conversation: %v, want a conflict", err)
	}

	r3 := st.Begin()
	if n, _ := r3.Gate1Counts(ctx, c); n.Intent != 1 {
		t.Fatalf("committed counters: %+v", n)
	}
	if n, _ := r3.SlotAsks(ctx, c, "k", "to_account"); n != 2 {
		t.Fatalf("committed ask count: %d", n)
	}
	if n, _ := r3.SlotAsks(ctx, other, "k", "to_account"); n != 0 {
		t.Fatalf("another conversation sees the count: %d", n)
	}
	b, ok, err := r3.Question(ctx, "q_1")
	if err != nil || !ok || b.ActionKey != "k" || b.Value != json.Number("9007199254740993") {
		t.Fatalf("question binding: %+v %v %v", b, ok, err)
	}
	// Question ids come from callers: any bytes, any length, are a key of fixed length.
	for _, id := range []string{"q_unknown", "", "q\x00/../conv", strings.Repeat("q", 1<<20)} {
		if _, ok, err := r3.Question(ctx, id); ok || err != nil {
			t.Fatalf("unknown question %.20q: %v %v", id, ok, err)
		}
	}

	// A reset replaces whatever is there without reading it, and empties the key.
	r4 := st.Begin()
	r4.ResetConversation(ctx, c)
	if n, _ := r4.Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("counters after reset: %+v", n)
	}
	if err := commit(r4, rec); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Begin().SlotAsks(ctx, c, "k", "to_account"); n != 0 {
		t.Fatalf("ask count after reset: %d", n)
	}
	resp, err := st.cli.Get(ctx, st.key(kindConversation, string(convKey(c))))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a reset conversation with nothing counted keeps its key: %v %v", resp, err)
	}
}

// TestEtcdLeases: counters and question ids are attached to a lease that lives at least the
// configured TTL; deferred intents, and the bindings of the answers they store, carry none
// unless deferred_ttl is set.
func TestEtcdLeases(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	for _, deferredTTL := range []time.Duration{0, 48 * time.Hour} {
		t.Run(fmt.Sprint("deferred_ttl=", deferredTTL), func(t *testing.T) {
			st := newTestEtcd(t, endpoint, EtcdOptions{TTL: time.Hour, DeferredTTL: deferredTTL})
			c := gates.Conversation{Principal: "u_01", ID: "leases"}
			key := "u_01:send money:bank/schedule_transfer"
			// An earlier run asked for the date; the deferring run stores its answer.
			r0 := st.Begin()
			r0.SaveQuestion(ctx, "q_when", gates.QuestionBinding{Principal: "u_01", ActionKey: key, SlotID: "when"})
			if err := commit(r0, &api.Record{Outcome: api.OutcomeAskUser}); err != nil {
				t.Fatal(err)
			}
			r := st.Begin()
			r.SetGate1Counts(ctx, c, gates.Gate1Counts{Tool: 1})
			r.SaveQuestion(ctx, "q_lease", gates.QuestionBinding{Principal: "u_01", SlotID: "c3_tool"})
			if err := r.Prefetch(ctx, &api.Request{UserAnswers: []api.Answer{{QuestionID: "q_when"}}}); err != nil {
				t.Fatal(err)
			}
			rec := &api.Record{RecordID: "rec_d", Outcome: api.OutcomeDeferred, ActionKey: &key, Principal: "u_01",
				Server: "bank", Tool: "schedule_transfer",
				Deferred: &api.DeferredIntent{UserAnswers: []api.Answer{{QuestionID: "q_when"}}}}
			if err := commit(r, rec); err != nil {
				t.Fatal(err)
			}
			ttlOf := func(k string) int64 {
				t.Helper()
				resp, err := st.cli.Get(ctx, k)
				if err != nil || len(resp.Kvs) != 1 {
					t.Fatalf("get %s: %v %v", k, resp, err)
				}
				if resp.Kvs[0].Lease == 0 {
					return 0
				}
				l, err := st.cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
				if err != nil {
					t.Fatal(err)
				}
				return l.GrantedTTL
			}
			for _, k := range []string{st.key(kindConversation, string(convKey(c))), st.key(kindQuestion, "q_lease")} {
				if ttl := ttlOf(k); ttl < 3600 || ttl > 3600+3600/24+1 {
					t.Errorf("%s: lease of %ds, want 1h up to one bucket more", k, ttl)
				}
			}
			// The intent, and the binding of the answer it stores, live as long as deferred_ttl.
			for _, k := range []string{st.key(kindDeferred, key), st.key(kindQuestion, "q_when")} {
				ttl := ttlOf(k)
				if want := int64(deferredTTL / time.Second); (want == 0) != (ttl == 0) || ttl < want {
					t.Errorf("%s: lease of %ds with deferred_ttl %s", k, ttl, deferredTTL)
				}
			}
			got, err := st.Deferred(ctx, key)
			if err != nil || got == nil || got.RecordID != "rec_d" || got.Outcome != api.OutcomeDeferred {
				t.Fatalf("deferred record: %+v %v", got, err)
			}
			if got, err := st.Deferred(ctx, key+"x"); got != nil || err != nil {
				t.Fatalf("unknown action key: %+v %v", got, err)
			}
		})
	}
}

// TestEtcdPriorOrder: receipts may arrive out of order at different replicas; an older
// execution (by record id, whatever its receipt's iat) never replaces a newer baseline, and the
// same one again changes nothing.
func TestEtcdPriorOrder(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	a := newTestEtcd(t, endpoint, EtcdOptions{})
	b := newTestEtcd(t, endpoint, EtcdOptions{})
	vals := func(to string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"to_account": json.RawMessage(`"` + to + `"`), "amount": json.RawMessage(`9007199254740993`)}
	}
	if res, err := a.SetBaseline(ctx, "k", Baseline{IssuedAt: 100, VerdictID: "j2", RecordID: "rec_2", Values: vals("new")}); res != BaselineApplied || err != nil {
		t.Fatalf("first baseline: %v %v", res, err)
	}
	if res, err := b.SetBaseline(ctx, "k", Baseline{IssuedAt: 200, VerdictID: "j1", RecordID: "rec_1", Values: vals("old")}); res != BaselineSuperseded || err != nil {
		t.Fatalf("an older execution replaced the baseline: %v %v", res, err)
	}
	if res, err := b.SetBaseline(ctx, "k", Baseline{IssuedAt: 100, VerdictID: "j2", RecordID: "rec_2", Values: vals("new")}); res != BaselineCurrent || err != nil {
		t.Fatalf("the same receipt again: %v %v", res, err)
	}
	v, ok, err := b.Begin().PriorValue(ctx, "k", "to_account")
	if err != nil || !ok || v != "new" {
		t.Fatalf("prior to_account: %v %v %v", v, ok, err)
	}
	if v, _, _ := a.Begin().PriorValue(ctx, "k", "amount"); v != json.Number("9007199254740993") {
		t.Fatalf("prior amount lost precision: %v", v)
	}
	if _, ok, _ := a.Begin().PriorValue(ctx, "k", "memo"); ok {
		t.Fatal("a field the call did not carry has a prior value")
	}
}

// TestEtcdPrefetchQuestions: the bindings of every answered question id are read ahead in
// batched transactions (more ids than one batch here), so the engine's reads need no further
// round trip — they succeed even once the store is closed.
func TestEtcdPrefetchQuestions(t *testing.T) {
	ctx := context.Background()
	st := newTestEtcd(t, etcdtest.Start(t), EtcdOptions{})
	w := st.Begin()
	for i := range 10 {
		w.SaveQuestion(ctx, fmt.Sprintf("q_%d", i*20), gates.QuestionBinding{Principal: "u_01", SlotID: fmt.Sprint("s", i*20)})
	}
	if err := commit(w, &api.Record{Outcome: api.OutcomeAskUser}); err != nil {
		t.Fatal(err)
	}
	req := &api.Request{}
	for i := range 3 * prefetchBatch {
		req.UserAnswers = append(req.UserAnswers, api.Answer{QuestionID: fmt.Sprintf("q_%d", i)})
	}
	req.UserAnswers = append(req.UserAnswers, req.UserAnswers[:5]...) // repeated ids are read once
	r := st.Begin()
	if err := r.Prefetch(ctx, req); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for i := range 3 * prefetchBatch {
		b, ok, err := r.Question(ctx, fmt.Sprintf("q_%d", i))
		switch {
		case err != nil:
			t.Fatalf("q_%d read again after prefetch: %v", i, err)
		case ok != (i%20 == 0 && i < 200):
			t.Fatalf("q_%d: found %v", i, ok)
		case ok && b.SlotID != fmt.Sprint("s", i):
			t.Fatalf("q_%d: binding %+v", i, b)
		}
	}
	if _, _, err := r.Question(ctx, "q_not_prefetched"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read on a closed store: %v", err)
	}
}

// TestEtcdLeaseRevoked: a write under a lease the server no longer has (revoked, or expired
// while cached) is refused with etcd's typed error; the store forgets the lease, grants a new
// one and writes again, once.
func TestEtcdLeaseRevoked(t *testing.T) {
	ctx := context.Background()
	st := newTestEtcd(t, etcdtest.Start(t), EtcdOptions{TTL: time.Hour})
	c := gates.Conversation{Principal: "u_01", ID: "revoked"}
	save := func(tool int) {
		t.Helper()
		r := st.Begin()
		r.SetGate1Counts(ctx, c, gates.Gate1Counts{Tool: tool})
		if err := commit(r, &api.Record{Outcome: api.OutcomeAskUser}); err != nil {
			t.Fatalf("commit after the lease was revoked: %v", err)
		}
	}
	save(1)
	leases, err := st.cli.Leases(ctx)
	if err != nil || len(leases.Leases) == 0 {
		t.Fatalf("leases: %v %v", leases, err)
	}
	for _, l := range leases.Leases {
		if _, err := st.cli.Revoke(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	save(2)
	resp, err := st.cli.Get(ctx, st.key(kindConversation, string(convKey(c))))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("conversation after the second commit: %v %v", resp, err)
	}
}
