package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/keys"
)

// vdEtcdReplicas starts two verdictd processes sharing the etcd at endpoint, as replicas of one
// deployment: one prefix, one signing key (the first's), each with its own data directory.
func vdEtcdReplicas(t *testing.T, endpoint string) ([]*gateConfig, []*client) {
	t.Helper()
	store := map[string]any{"kind": "etcd", "endpoints": []string{endpoint}, "prefix": "/e2e-verdictd/",
		"request_timeout": "500ms"}
	var gs []*gateConfig
	var cs []*client
	for i := range 2 {
		extra := map[string]any{"state_store": store}
		if i > 0 {
			extra["signing_key"] = filepath.Join(gs[0].dir, "keys", keys.PrivateKeyFile)
		}
		g := newGateConfig(t, inlinePolicy, extra)
		startVerdictd(t, g)
		gs = append(gs, g)
		cs = append(cs, newClient(g.addr, callerToken, 30*time.Second))
	}
	return gs, cs
}

// vdEtcdRecord is what these tests read of a decision record.
type vdEtcdRecord struct {
	RecordID       string  `json:"record_id"`
	ConversationID string  `json:"conversation_id"`
	Outcome        string  `json:"outcome"`
	ActionKey      *string `json:"action_key"`
	Phase          *string `json:"phase"`
	VerdictID      *string `json:"verdict_id"`
	Gate           struct {
		Kind string `json:"kind"`
	} `json:"gate"`
	Questions []struct {
		QuestionID string `json:"question_id"`
		SlotID     string `json:"slot_id"`
	} `json:"questions"`
	RejectedAnswers []any `json:"rejected_answers"`
}

func vdEtcdPost(t *testing.T, c *client, body []byte) vdEtcdRecord {
	t.Helper()
	r := c.do(context.Background(), http.MethodPost, "/v1/preflight", body)
	if r.status != http.StatusOK {
		t.Fatalf("preflight on %s: %d %s %v", c.base, r.status, r.body, r.err)
	}
	var rec vdEtcdRecord
	if err := json.Unmarshal(r.body, &rec); err != nil {
		t.Fatalf("decode record: %v %s", err, r.body)
	}
	return rec
}

// vdEtcdRecords reads every decision record of a replica through its admin API.
func vdEtcdRecords(t *testing.T, g *gateConfig) []vdEtcdRecord {
	t.Helper()
	admin := newClient(g.addr, adminToken, 30*time.Second)
	r := admin.do(context.Background(), http.MethodGet, "/v1/records", nil)
	if r.status != http.StatusOK {
		t.Fatalf("records of %s: %d %s", g.addr, r.status, r.body)
	}
	var out []vdEtcdRecord
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var rec vdEtcdRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("record line: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

// vdEtcdUndetermined is a transfer request whose timing is missing, so it asks to restate the
// intent until the Gate-1 ceiling.
func vdEtcdUndetermined(conversation string) []byte {
	var req map[string]any
	json.Unmarshal(transferRequest(conversation, 500, true), &req)
	req["intent"] = map[string]any{"action_name": map[string]any{"segment": 0, "span": []int{0, 10}}}
	req["intent_attempt"] = 0
	b, _ := json.Marshal(req)
	return b
}

// TestVerdictdEtcdReplicas: two verdictd processes sharing one etcd decide as one: Gate-1 asks
// alternating between them exhaust at the ceiling; an answer to a question replica A issued is
// accepted by replica B; a deferred request created on A is triggered on B.
func TestVerdictdEtcdReplicas(t *testing.T) {
	gs, cs := vdEtcdReplicas(t, etcdtest.Start(t))
	a, b := cs[0], cs[1]

	t.Run("gate-1 ceiling alternating", func(t *testing.T) {
		body := vdEtcdUndetermined("c_alt")
		var got []string
		for _, c := range []*client{a, b, a, b, a} {
			got = append(got, vdEtcdPost(t, c, body).Outcome)
		}
		if fmt.Sprint(got) != "[ask_user ask_user exhausted exhausted exhausted]" {
			t.Fatalf("outcomes %v", got)
		}
	})

	t.Run("answer on the other replica", func(t *testing.T) {
		r1 := vdEtcdPost(t, a, transferRequest("c_answer", 700, false))
		if r1.Outcome != "ask_user" || len(r1.Questions) != 1 || r1.Questions[0].SlotID != "to_account" {
			t.Fatalf("first run on A: %+v", r1)
		}
		var req map[string]any
		json.Unmarshal(transferRequest("c_answer", 700, false), &req)
		req["user_answers"] = []map[string]any{{"question_id": r1.Questions[0].QuestionID, "value": "110-222-333"}}
		body, _ := json.Marshal(req)
		r2 := vdEtcdPost(t, b, body)
		if r2.Outcome != "verdict_issued" || len(r2.RejectedAnswers) != 0 {
			t.Fatalf("B with the answer to A's question: %+v", r2)
		}
	})

	t.Run("deferred on A, triggered on B", func(t *testing.T) {
		var req map[string]any
		json.Unmarshal(transferRequest("c_sched", 900, true), &req)
		req["intent"].(map[string]any)["when_case"] = "scheduled"
		body, _ := json.Marshal(req)
		r := vdEtcdPost(t, a, body)
		if r.Outcome != "deferred" || r.ActionKey == nil {
			t.Fatalf("scheduled transfer on A: %+v", r)
		}
		trigger := fmt.Appendf(nil, `{"principal":%q,"phase":"at_trigger","action_key":%q,
			"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, principal, *r.ActionKey)
		tr := vdEtcdPost(t, b, trigger)
		if tr.Outcome != "verdict_issued" || tr.Phase == nil || *tr.Phase != "at_trigger" || *tr.ActionKey != *r.ActionKey {
			t.Fatalf("trigger on B: %+v", tr)
		}
		// The trigger is on B's record; the deferred record only on A's.
		onB := false
		for _, rec := range vdEtcdRecords(t, gs[1]) {
			onB = onB || rec.RecordID == tr.RecordID
			if rec.RecordID == r.RecordID {
				t.Error("A's deferred record is in B's file")
			}
		}
		if !onB {
			t.Error("the trigger run is not on B's record")
		}
	})
}

// TestVerdictdEtcdStoppedMidRun: clients post Gate-1 asks for many conversations and
// verdict-issuing requests to two replicas; etcd is killed mid-run, and both replicas answer
// 503 state_store_unavailable, write no record and count nothing; etcd returns and they decide
// again. At the end no conversation was asked past its ceiling across the outage and the
// replicas, every 200 answer is on one replica's record and no record is without one, and no
// verdict id was issued twice.
func TestVerdictdEtcdStoppedMidRun(t *testing.T) {
	srv := etcdtest.NewServer(t)
	gs, cs := vdEtcdReplicas(t, srv.Endpoint)
	const conversations = 40

	var (
		mu          sync.Mutex
		answers     = map[string]vdEtcdRecord{} // record id → answer
		unexpected  []string
		answered    atomic.Int64
		unavailable atomic.Int64
		next        atomic.Int64
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				body := vdEtcdUndetermined(fmt.Sprintf("c_%d", (n/4)%conversations))
				if n%4 == 0 {
					body = transferRequest(fmt.Sprintf("v_%d", n), int(n), true)
				}
				r := cs[(int(n)+w)%2].do(context.Background(), http.MethodPost, "/v1/preflight", body)
				answered.Add(1)
				mu.Lock()
				switch {
				case r.status == http.StatusOK:
					var rec vdEtcdRecord
					if err := json.Unmarshal(r.body, &rec); err != nil {
						unexpected = append(unexpected, "200 without a record")
					}
					answers[rec.RecordID] = rec
				case r.status == http.StatusServiceUnavailable && r.errorCode() == "state_store_unavailable":
					unavailable.Add(1)
				default:
					unexpected = append(unexpected, fmt.Sprintf("%d %q %v", r.status, r.errorCode(), r.err))
				}
				mu.Unlock()
			}
		})
	}
	giveUp := func() { close(stop); wg.Wait() }
	waitUnderLoad(t, "60 answers before the outage", func() bool { return answered.Load() >= 60 }, giveUp)
	srv.Kill()
	waitUnderLoad(t, "20 refusals during the outage", func() bool { return unavailable.Load() >= 20 }, giveUp)
	srv.Restart()
	after := answered.Load()
	waitUnderLoad(t, "200 answers after etcd returned", func() bool { return answered.Load() >= after+200 }, giveUp)
	close(stop)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("unexpected answers: %v", unexpected)
	}

	asks := map[string]int{}
	verdicts := map[string]string{}
	onRecord := 0
	for i, g := range gs {
		for _, rec := range vdEtcdRecords(t, g) {
			onRecord++
			if _, ok := answers[rec.RecordID]; !ok {
				t.Errorf("replica %d holds record %s (%s) that no client was answered with", i, rec.RecordID, rec.Outcome)
			}
			if rec.Outcome == "ask_user" && rec.Gate.Kind == "intent_undetermined" {
				asks[rec.ConversationID]++
			}
			if rec.VerdictID != nil {
				if prev, dup := verdicts[*rec.VerdictID]; dup {
					t.Errorf("verdict %s issued by records %s and %s", *rec.VerdictID, prev, rec.RecordID)
				}
				verdicts[*rec.VerdictID] = rec.RecordID
			}
		}
	}
	if onRecord != len(answers) {
		t.Errorf("%d answers with a record id, %d records on the two replicas", len(answers), onRecord)
	}
	for conv, n := range asks {
		if n > 2 {
			t.Errorf("conversation %s asked %d times across the replicas and the outage", conv, n)
		}
	}
	// After etcd returned every conversation went on to its ceiling.
	for i := range conversations {
		if r := vdEtcdPost(t, cs[i%2], vdEtcdUndetermined(fmt.Sprintf("c_%d", i))); r.Outcome != "exhausted" {
			t.Errorf("conversation c_%d after the run: %s", i, r.Outcome)
		}
	}
	var refused float64
	for _, g := range gs {
		refused += vdEtcdMetricSum(t, g, "verdictd_state_store_errors_total")
	}
	if refused != float64(unavailable.Load()) {
		t.Errorf("replicas counted %v state store errors, clients saw %d refusals", refused, unavailable.Load())
	}
	t.Logf("%d answers, %d refused while etcd was down, %d records, %d verdicts", answered.Load(), unavailable.Load(), onRecord, len(verdicts))
}

// vdEtcdMetricSum adds every series of a counter on a replica's /metrics.
func vdEtcdMetricSum(t *testing.T, g *gateConfig, name string) float64 {
	t.Helper()
	r := newClient(g.addr, "", 10*time.Second).do(context.Background(), http.MethodGet, "/metrics", nil)
	var sum float64
	for _, line := range strings.Split(string(r.body), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			sum += v
		}
	}
	return sum
}
