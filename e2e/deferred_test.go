package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// deferScheduled posts a scheduled transfer to c and returns its deferred record.
func deferScheduled(t *testing.T, c *client, conversation string) vdEtcdRecord {
	t.Helper()
	var req map[string]any
	json.Unmarshal(transferRequest(conversation, 900, true), &req)
	req["intent"].(map[string]any)["when_case"] = "scheduled"
	body, _ := json.Marshal(req)
	r := vdEtcdPost(t, c, body)
	if r.Outcome != "deferred" || r.ActionKey == nil {
		t.Fatalf("scheduled transfer: %+v", r)
	}
	return r
}

// triggerOf is the at_trigger request of a deferred record, with the pre-set data it needs.
func triggerOf(d vdEtcdRecord) []byte {
	return fmt.Appendf(nil, `{"principal":%q,"phase":"at_trigger","action_key":%q,
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, principal, *d.ActionKey)
}

// triggerAnswer is what a trigger got: the outcome of its record, or the status and code of
// its refusal.
func triggerAnswer(t *testing.T, r response) string {
	t.Helper()
	if r.status == http.StatusOK {
		var rec vdEtcdRecord
		if err := json.Unmarshal(r.body, &rec); err != nil {
			t.Fatalf("decode record: %v %s", err, r.body)
		}
		return rec.Outcome
	}
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(r.body, &env)
	return fmt.Sprint(r.status, " ", env.Error.Code)
}

// TestVerdictdOneOffTrigger: against a verdictd process, a scheduled intent triggered three
// times yields one verdict; the later triggers are refused 409 deferred_consumed and leave no
// record.
func TestVerdictdOneOffTrigger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	g := newGateConfig(t, inlinePolicy, nil)
	startVerdictd(t, g)
	c := newClient(g.addr, callerToken, 30*time.Second)
	d := deferScheduled(t, c, "c_once")
	var got []string
	for range 3 {
		got = append(got, triggerAnswer(t, c.do(context.Background(), http.MethodPost, "/v1/preflight", triggerOf(d))))
	}
	if want := "[verdict_issued 409 deferred_consumed 409 deferred_consumed]"; fmt.Sprint(got) != want {
		t.Fatalf("three triggers: %v, want %s", got, want)
	}
	verdicts := 0
	for _, rec := range vdEtcdRecords(t, g) {
		if rec.VerdictID != nil {
			verdicts++
		}
	}
	if verdicts != 1 {
		t.Fatalf("%d verdicts on record", verdicts)
	}
}

// TestVerdictdEtcdConcurrentTriggers: two verdictd processes sharing etcd, a deferred intent
// triggered by many clients on both at once: exactly one verdict across the replicas.
func TestVerdictdEtcdConcurrentTriggers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	gs, cs := vdEtcdReplicas(t, etcdtest.Start(t))
	d := deferScheduled(t, cs[0], "c_race")
	const n = 16
	var mu sync.Mutex
	got := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			a := triggerAnswer(t, cs[i%2].do(context.Background(), http.MethodPost, "/v1/preflight", triggerOf(d)))
			mu.Lock()
			got[a]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if want := map[string]int{"verdict_issued": 1, "409 deferred_consumed": n - 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("triggers: %v, want %v", got, want)
	}
	verdicts := 0
	for _, g := range gs {
		for _, rec := range vdEtcdRecords(t, g) {
			if rec.VerdictID != nil {
				verdicts++
			}
		}
	}
	if verdicts != 1 {
		t.Fatalf("%d verdicts on the replicas' records", verdicts)
	}
}
