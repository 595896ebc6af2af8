package verdictd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdtest"
	"github.com/verdictgate/verdict/internal/etcdx"
)

func TestStateStoreConfig(t *testing.T) {
	tests := []struct {
		name string
		ss   StateStore
		want string // substring of the error; "" for valid
	}{
		{"default", StateStore{}, ""},
		{"bbolt", StateStore{Kind: "bbolt"}, ""},
		{"etcd", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:2379", "http://127.0.0.2:2379"}}}, ""},
		{"etcd tls", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"https://etcd:2379"}, TLS: &EtcdTLS{CA: "ca.pem"}}}, ""},
		{"misspelt kind", StateStore{Kind: "etc"}, `state_store.kind "etc"`},
		{"bbolt with endpoints", StateStore{Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:2379"}}}, "apply only to kind etcd"},
		{"bbolt with ttl", StateStore{TTL: confx.Duration(time.Hour)}, "apply only to kind etcd"},
		{"no endpoints", StateStore{Kind: "etcd"}, "at least one endpoint"},
		{"not a url", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"127.0.0.1:2379"}}}, "want an http"},
		{"path", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:2379/v3"}}}, "nothing else"},
		{"mixed schemes", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"https://a:1", "http://b:1"}}}, "mix http and https"},
		{"tls over http", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:1"}, TLS: &EtcdTLS{CA: "ca.pem"}}}, "tls is set"},
		{"user without password", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:1"}, Username: "v"}}, "username and password"},
		{"cert without key", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"https://a:1"}, TLS: &EtcdTLS{Cert: "c.pem"}}}, "cert and key"},
		{"ttl under 2s", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:1"}}, TTL: confx.Duration(time.Second)}, "state_store.ttl"},
		{"deferred ttl under 2s", StateStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:1"}}, DeferredTTL: confx.Duration(time.Millisecond)}, "deferred_ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := errors.Join(tt.ss.validate()...)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestStateStoreConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/verdictd.yaml"
	yaml := `listen: 127.0.0.1:0
data_dir: ` + dir + `/data
issuer: verdictd-a
signing_key: ` + dir + `/signing.jwk
policy: ` + dir + `/policy.yaml
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `"}]
state_store:
  kind: etcd
  endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379]
  prefix: /prod/
  tls: {ca: /etc/etcd/ca.pem, cert: /etc/etcd/verdictd.pem, key: /etc/etcd/verdictd-key.pem}
  username: verdictd
  password_file: /etc/verdictd/etcd-password
  dial_timeout: 3s
  request_timeout: 500ms
  ttl: 12h
  deferred_ttl: 720h
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	got := c.StateStore.etcdOptions()
	if got.Prefix != "/prod/" || len(got.Endpoints) != 2 || got.TLS.CA != "/etc/etcd/ca.pem" || got.Username != "verdictd" ||
		got.RequestTimeout != 500*time.Millisecond || got.TTL != 12*time.Hour || got.DeferredTTL != 720*time.Hour {
		t.Fatalf("options %+v", got)
	}
	// A misspelt key under state_store stops the daemon rather than being ignored.
	if err := os.WriteFile(path, []byte(strings.Replace(yaml, "request_timeout", "request_timout", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "request_timout") {
		t.Fatalf("misspelt key: %v", err)
	}
	// An empty password file is refused at start.
	pw := dir + "/pw"
	os.WriteFile(pw, []byte("\n"), 0o600)
	ss := StateStore{Kind: StateStoreEtcd, Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:1"}, Username: "v", PasswordFile: pw}}
	if _, err := ss.readPassword(); err == nil {
		t.Fatal("empty password file accepted")
	}
}

func newEtcdState(t testing.TB, endpoint string, opts EtcdStateOptions) *EtcdState {
	t.Helper()
	opts.Endpoints = []string{endpoint}
	if opts.Prefix == "" {
		opts.Prefix = "/test/"
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = time.Second
	}
	st, err := NewEtcdState(context.Background(), opts)
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
	st := newEtcdState(t, etcdtest.Start(t), EtcdStateOptions{})
	c := gates.Conversation{Principal: "u_01", ID: "c1"}
	other := gates.Conversation{Principal: "u_01", ID: "c10"}
	rec := &gates.Record{RecordID: "rec_1", Outcome: gates.OutcomeAskUser}

	r1 := st.Run()
	if n, err := r1.Gate1Counts(ctx, c); err != nil || n != (gates.Gate1Counts{}) {
		t.Fatalf("fresh conversation: %+v %v", n, err)
	}
	r1.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	r1.SetSlotAsks(ctx, c, "k", "to_account", 2)
	r1.SaveQuestion(ctx, "q_1", gates.QuestionBinding{Principal: "u_01", ActionKey: "k", SlotID: "amount",
		Kind: gates.QuestionApproval, Value: json.Number("9007199254740993")})
	if n, _ := r1.Gate1Counts(ctx, c); n.Intent != 1 {
		t.Fatalf("a run does not see its own write: %+v", n)
	}
	if n, _ := st.Run().Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("uncommitted counters visible: %+v", n)
	}
	if _, ok, _ := st.Run().Question(ctx, "q_1"); ok {
		t.Fatal("uncommitted question visible")
	}

	// A second run reads the same conversation before the first commits.
	r2 := st.Run()
	if _, err := r2.Gate1Counts(ctx, c); err != nil {
		t.Fatal(err)
	}
	r2.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: 1})
	if err := r1.Commit(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	if err := r2.Commit(ctx, rec, nil); !errors.Is(err, errStateConflict) {
		t.Fatalf("commit over a changed conversation: %v, want a conflict", err)
	}

	r3 := st.Run()
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
	r4 := st.Run()
	r4.ResetConversation(ctx, c)
	if n, _ := r4.Gate1Counts(ctx, c); n != (gates.Gate1Counts{}) {
		t.Fatalf("counters after reset: %+v", n)
	}
	if err := r4.Commit(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Run().SlotAsks(ctx, c, "k", "to_account"); n != 0 {
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
			st := newEtcdState(t, endpoint, EtcdStateOptions{TTL: time.Hour, DeferredTTL: deferredTTL})
			c := gates.Conversation{Principal: "u_01", ID: "leases"}
			key := "u_01:send money:bank/schedule_transfer"
			// An earlier run asked for the date; the deferring run stores its answer.
			r0 := st.Run()
			r0.SaveQuestion(ctx, "q_when", gates.QuestionBinding{Principal: "u_01", ActionKey: key, SlotID: "when"})
			if err := r0.Commit(ctx, &gates.Record{Outcome: gates.OutcomeAskUser}, nil); err != nil {
				t.Fatal(err)
			}
			r := st.Run()
			r.SetGate1Counts(ctx, c, gates.Gate1Counts{Tool: 1})
			r.SaveQuestion(ctx, "q_lease", gates.QuestionBinding{Principal: "u_01", SlotID: "c3_tool"})
			if err := r.prefetch(ctx, &gates.Request{UserAnswers: []gates.Answer{{QuestionID: "q_when"}}}); err != nil {
				t.Fatal(err)
			}
			rec := &gates.Record{RecordID: "rec_d", Outcome: gates.OutcomeDeferred, ActionKey: &key, Principal: "u_01",
				Server: "bank", Tool: "schedule_transfer",
				Deferred: &gates.DeferredIntent{UserAnswers: []gates.Answer{{QuestionID: "q_when"}}}}
			if err := r.Commit(ctx, rec, nil); err != nil {
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
			if err != nil || got == nil || got.RecordID != "rec_d" || got.Outcome != gates.OutcomeDeferred {
				t.Fatalf("deferred record: %+v %v", got, err)
			}
			if got, err := st.Deferred(ctx, key+"x"); got != nil || err != nil {
				t.Fatalf("unknown action key: %+v %v", got, err)
			}
		})
	}
}

// TestEtcdPriorOrder: receipts may arrive out of order at different replicas; an older
// execution never replaces a newer baseline.
func TestEtcdPriorOrder(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	a := newEtcdState(t, endpoint, EtcdStateOptions{})
	b := newEtcdState(t, endpoint, EtcdStateOptions{})
	vals := func(to string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"to_account": json.RawMessage(`"` + to + `"`), "amount": json.RawMessage(`9007199254740993`)}
	}
	if ok, err := a.setPrior(ctx, "k", priorDoc{IssuedAt: 200, VerdictID: "j2", Values: vals("new")}); !ok || err != nil {
		t.Fatalf("first baseline: %v %v", ok, err)
	}
	if ok, err := b.setPrior(ctx, "k", priorDoc{IssuedAt: 100, VerdictID: "j1", Values: vals("old")}); ok || err != nil {
		t.Fatalf("an older receipt replaced the baseline: %v %v", ok, err)
	}
	v, ok, err := b.PriorValue(ctx, "k", "to_account")
	if err != nil || !ok || v != "new" {
		t.Fatalf("prior to_account: %v %v %v", v, ok, err)
	}
	if v, _, _ := a.Run().PriorValue(ctx, "k", "amount"); v != json.Number("9007199254740993") {
		t.Fatalf("prior amount lost precision: %v", v)
	}
	if _, ok, _ := a.PriorValue(ctx, "k", "memo"); ok {
		t.Fatal("a field the call did not carry has a prior value")
	}
}

// newReplicas starts n verdictd services sharing the etcd at endpoint under one prefix, with
// one signing key (the first's) and one executor's receipt keys, as replicas of one deployment
// are configured. The first has an executor beside it when o.executor is set.
func newReplicas(t testing.TB, endpoint string, n int, o envOpts) []*env {
	t.Helper()
	var out []*env
	for i := range n {
		oi := o
		oi.executor = o.executor && i == 0
		oi.mutate = func(c *Config) {
			c.StateStore = StateStore{Kind: StateStoreEtcd, Config: etcdx.Config{Endpoints: []string{endpoint}, Prefix: "/replicas/",
				RequestTimeout: confx.Duration(time.Second)}}
			if i > 0 {
				c.SigningKey, c.Executors = out[0].cfg.SigningKey, out[0].cfg.Executors
			}
			if o.mutate != nil {
				o.mutate(c)
			}
		}
		out = append(out, newEnv(t, oi))
	}
	return out
}

// TestEtcdReplicas: two replicas behind one etcd behave as one verdictd: Gate-1 asks
// alternating between them exhaust at the ceiling; answers to a question one issued are
// accepted by the other; a receipt sent to the replica that did not issue the verdict makes
// prior state for both; a deferred request created on one is triggered on the other.
func TestEtcdReplicas(t *testing.T) {
	rs := newReplicas(t, etcdtest.Start(t), 2, envOpts{executor: true})
	a, b := rs[0], rs[1]

	t.Run("gate-1 ceiling across replicas", func(t *testing.T) {
		req := landlord()
		req["conversation_id"] = "c_gate1"
		req["intent"] = map[string]any{"action_name": map[string]any{"segment": 0, "span": []int{0, 10}}} // no timing
		var outcomes []string
		for i, e := range []*env{a, b, a, b} {
			req["intent_attempt"] = 0
			r := e.preflight(req)
			outcomes = append(outcomes, r.Outcome)
			if i == 2 && r.Gate.Kind != "intent_undetermined_exhausted" {
				t.Errorf("third ask: gate %s", r.Gate.Kind)
			}
		}
		if fmt.Sprint(outcomes) != "[ask_user ask_user exhausted exhausted]" {
			t.Fatalf("outcomes %v", outcomes)
		}
		req["new_request"] = true
		if r := b.preflight(req); r.Outcome != "ask_user" {
			t.Fatalf("after new_request on the other replica: %s", r.Outcome)
		}
	})

	var issued *record
	t.Run("answers across replicas", func(t *testing.T) {
		r1 := a.preflight(landlord())
		q := r1.question("to_account")
		r2 := b.preflight(landlord(map[string]any{"question_id": q.QuestionID, "value": "110-222-333"}))
		if s := r2.slot("to_account"); s["status"] != "known" || len(r2.RejectedAnswers) != 0 {
			t.Fatalf("answer to A's question on B: %v\n%s", s, r2.raw)
		}
		approve := r2.question("confirm_transfer")
		var v any
		json.Unmarshal(approve.Value, &v)
		issued = a.preflight(landlord(
			map[string]any{"question_id": q.QuestionID, "value": "110-222-333"},
			map[string]any{"question_id": approve.QuestionID, "approved": true, "value": v},
		))
		if issued.Outcome != "verdict_issued" {
			t.Fatalf("answers from both replicas: %s\n%s", issued.Outcome, issued.raw)
		}
	})

	t.Run("receipt on the other replica", func(t *testing.T) {
		if issued == nil {
			t.Skip("no verdict")
		}
		res := a.execute(*issued.Verdict, issued.CallArguments)
		if res.status != http.StatusOK || res.receipt == "" {
			t.Fatalf("execute: %d %s", res.status, res.body)
		}
		status, out := do(t, "POST", b.srv.URL+"/v1/receipts", callerToken, "application/jose", []byte(res.receipt))
		if status != http.StatusOK || !strings.Contains(string(out), `"prior_state":true`) {
			t.Fatalf("receipt on B for A's verdict: %d %s", status, out)
		}
		req := landlord()
		req["conversation_id"] = "c_prior"
		next := a.preflight(req)
		offered, _ := next.slot("to_account")["offered"].(map[string]any)
		if offered["value"] != "110-222-333" || offered["source"] != "prior_state" {
			t.Fatalf("A does not offer the baseline B stored: %s", next.raw)
		}
	})

	t.Run("deferred on A, triggered on B", func(t *testing.T) {
		akey := deferTransfer(t, a)
		body := fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q,
			"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, akey)
		status, out := do(t, "POST", b.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body))
		if status != http.StatusOK || !strings.Contains(string(out), `"outcome":"verdict_issued"`) {
			t.Fatalf("trigger on B: %d %s", status, out)
		}
		var tr record
		json.Unmarshal(out, &tr)
		if *tr.Phase != "at_trigger" || *tr.ActionKey != akey {
			t.Fatalf("trigger run: %s", out)
		}
		// The verdict B issued runs on the executor, and its receipt reaches A.
		res := a.execute(*tr.Verdict, tr.CallArguments)
		if res.status != http.StatusOK {
			t.Fatalf("execute the triggered transfer: %d %s", res.status, res.body)
		}
		if status, out := do(t, "POST", a.srv.URL+"/v1/receipts", callerToken, "application/jose", []byte(res.receipt)); status != http.StatusOK {
			t.Fatalf("receipt on A for B's verdict: %d %s", status, out)
		}
		body = fmt.Sprintf(`{"principal":"u_02","phase":"at_trigger","action_key":%q}`, akey)
		if status, _ := do(t, "POST", b.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body)); status != http.StatusNotFound {
			t.Fatalf("foreign trigger on B: %d", status)
		}
	})
}

// deferTransfer runs a scheduled transfer on e until it is deferred and returns its action key.
func deferTransfer(t *testing.T, e *env) string {
	t.Helper()
	text := "schedule a transfer of 50,000 won to 110-222-333"
	req := map[string]any{
		"principal": "u_01", "conversation_id": "c_sched", "server": "bank", "tool": "schedule_transfer",
		"instruction": []map[string]any{{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "scheduled", "action_name": map[string]any{"segment": 0, "span": []int{0, 19}}},
		"candidates": []map[string]any{
			{"field": "amount", "segment": 0, "span": []int{23, 29}, "value": 50000},
			{"field": "to_account", "segment": 0, "span": []int{37, 48}, "value": "110-222-333"},
		},
		"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user"}},
	}
	var answers []map[string]any
	for range 4 {
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		r := e.preflight(req)
		if r.Outcome == "deferred" {
			return *r.ActionKey
		}
		if r.Outcome != "ask_user" {
			t.Fatalf("scheduled transfer: %s\n%s", r.Outcome, r.raw)
		}
		for _, q := range r.Questions {
			switch q.Kind {
			case "approval":
				var v any
				json.Unmarshal(q.Value, &v)
				answers = append(answers, map[string]any{"question_id": q.QuestionID, "approved": true, "value": v})
			case "value":
				answers = append(answers, map[string]any{"question_id": q.QuestionID, "value": "2026-12-24T09:00:00Z"})
			}
		}
	}
	t.Fatal("scheduled transfer never deferred")
	return ""
}

// TestEtcdConcurrentAsks: many clients post the same undetermined request to two replicas at
// once; the optimistic commit lets exactly two asks through, whatever the interleaving.
func TestEtcdConcurrentAsks(t *testing.T) {
	rs := newReplicas(t, etcdtest.Start(t), 2, envOpts{policy: inlinePolicy})
	var req map[string]any
	json.Unmarshal(oneShotRequest("c_race"), &req)
	req["intent"] = map[string]any{"when_case": "immediate"} // no action name
	body, _ := json.Marshal(req)

	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			status, out := do(t, "POST", rs[i%2].srv.URL+"/v1/preflight", callerToken, "application/json", body)
			var r record
			json.Unmarshal(out, &r)
			mu.Lock()
			defer mu.Unlock()
			if status != http.StatusOK {
				outcomes[fmt.Sprint(status)]++
				return
			}
			outcomes[r.Outcome]++
		})
	}
	wg.Wait()
	if outcomes["ask_user"] != 2 || outcomes["exhausted"] != 22 {
		t.Fatalf("outcomes %v, want 2 ask_user and 22 exhausted", outcomes)
	}
	t.Logf("conflicts decided again: %v + %v", rs[0].metric("verdictd_state_store_conflicts_total"),
		rs[1].metric("verdictd_state_store_conflicts_total"))
}

// records lists e's decision records through the admin API.
func (e *env) records() []string {
	e.t.Helper()
	status, out := do(e.t, "GET", e.srv.URL+"/v1/records", adminToken, "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("records: %d %s", status, out)
	}
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, r.RecordID)
	}
	return ids
}

// TestEtcdDownFailsClosed: with etcd stopped, preflights and receipts are refused with 503
// state_store_unavailable and counted; no record is written and no ask counted. When etcd
// returns, the ceiling continues from where it was.
func TestEtcdDownFailsClosed(t *testing.T) {
	srv := etcdtest.NewServer(t)
	e := newReplicas(t, srv.Endpoint, 1, envOpts{policy: inlinePolicy})[0]
	var req map[string]any
	json.Unmarshal(oneShotRequest("c_down"), &req)
	req["intent"] = map[string]any{"when_case": "immediate"}
	body, _ := json.Marshal(req)
	if r := e.preflight(req); r.Outcome != "ask_user" {
		t.Fatalf("before the outage: %s", r.Outcome)
	}
	before := len(e.records())

	srv.Kill()
	for _, b := range [][]byte{body, oneShotRequest("c_fresh")} {
		status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", b)
		if status != http.StatusServiceUnavailable || !strings.Contains(string(out), `"code":"`+CodeStateUnavailable+`"`) {
			t.Fatalf("preflight with etcd down: %d %s", status, out)
		}
	}
	trigger := `{"principal":"u_01","phase":"at_trigger","action_key":"u_01:send money:pay/transfer"}`
	if status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(trigger)); status != http.StatusServiceUnavailable {
		t.Fatalf("trigger with etcd down: %d %s", status, out)
	}
	if n := len(e.records()); n != before {
		t.Fatalf("%d records written while etcd was down", n-before)
	}
	if n := e.metric(`verdictd_state_store_errors_total{op="read"}`) + e.metric(`verdictd_state_store_errors_total{op="commit"}`) +
		e.metric(`verdictd_state_store_errors_total{op="deferred"}`); n < 3 {
		t.Fatalf("state store errors counted: %v", n)
	}

	srv.Restart()
	var outcomes []string
	deadline := time.Now().Add(30 * time.Second)
	for len(outcomes) < 2 {
		status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", body)
		switch {
		case status == http.StatusOK:
			var r record
			json.Unmarshal(out, &r)
			outcomes = append(outcomes, r.Outcome)
		case status == http.StatusServiceUnavailable && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond) // the client reconnects
		default:
			t.Fatalf("after etcd returned: %d %s", status, out)
		}
	}
	if fmt.Sprint(outcomes) != "[ask_user exhausted]" {
		t.Fatalf("after the outage: %v, want the second ask and then the ceiling", outcomes)
	}
}

// TestEtcdPrefetchQuestions: the bindings of every answered question id are read ahead in
// batched transactions (more ids than one batch here), so the engine's reads need no further
// round trip — they succeed even once the store is closed.
func TestEtcdPrefetchQuestions(t *testing.T) {
	ctx := context.Background()
	st := newEtcdState(t, etcdtest.Start(t), EtcdStateOptions{})
	w := st.Run()
	for i := range 10 {
		w.SaveQuestion(ctx, fmt.Sprintf("q_%d", i*20), gates.QuestionBinding{Principal: "u_01", SlotID: fmt.Sprint("s", i*20)})
	}
	if err := w.Commit(ctx, &gates.Record{Outcome: gates.OutcomeAskUser}, nil); err != nil {
		t.Fatal(err)
	}
	req := &gates.Request{}
	for i := range 3 * prefetchBatch {
		req.UserAnswers = append(req.UserAnswers, gates.Answer{QuestionID: fmt.Sprintf("q_%d", i)})
	}
	req.UserAnswers = append(req.UserAnswers, req.UserAnswers[:5]...) // repeated ids are read once
	r := st.Run()
	if err := r.prefetch(ctx, req); err != nil {
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
	if _, _, err := r.Question(ctx, "q_not_prefetched"); !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("read on a closed store: %v", err)
	}
}
