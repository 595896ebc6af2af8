package verdictd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
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
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `", principals: ["*"]}]
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
	return deferIntent(t, e, "scheduled", "c_sched").actionKey
}

// deferred is a deferred record: its action key and id.
type deferred struct{ actionKey, recordID string }

// deferIntent runs a transfer of timing whenCase on e, in conversation conv, until it is
// deferred.
func deferIntent(t testing.TB, e *env, whenCase, conv string) deferred {
	t.Helper()
	text := "schedule a transfer of 50,000 won to 110-222-333"
	req := map[string]any{
		"principal": "u_01", "conversation_id": conv, "server": "bank", "tool": "schedule_transfer",
		"instruction": []map[string]any{{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": whenCase, "action_name": map[string]any{"segment": 0, "span": []int{0, 19}}},
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
			return deferred{*r.ActionKey, r.RecordID}
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
	t.Fatal("transfer never deferred")
	return deferred{}
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
		if status != http.StatusServiceUnavailable || !strings.Contains(string(out), `"code":"`+api.CodeStateStoreUnavailable+`"`) {
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
