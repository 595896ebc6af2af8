package verdictd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// triggerBody is the at_trigger request of akey, with the pre-set data the bank's transfer
// needs at trigger time.
func triggerBody(akey string) []byte {
	return fmt.Appendf(nil, `{"principal":"u_01","phase":"at_trigger","action_key":%q,
		"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, akey)
}

// trigger posts the at_trigger request of akey and returns the status, the record (on 200)
// and the error code (otherwise).
func (e *env) trigger(akey string) (int, *record, string) {
	e.t.Helper()
	status, out := do(e.t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", triggerBody(akey))
	return decodeTriggerAnswer(e.t, status, out)
}

func decodeTriggerAnswer(t testing.TB, status int, out []byte) (int, *record, string) {
	t.Helper()
	if status != http.StatusOK {
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal(out, &env)
		if env.Error.Code == "" {
			t.Fatalf("refusal without a code: %d %s", status, out)
		}
		return status, nil, env.Error.Code
	}
	var r record
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decode record: %v\n%s", err, out)
	}
	r.raw = out
	validateRecord(t, out)
	return status, &r, ""
}

// TestOneOffTriggerRunsOnce: a scheduled intent triggered three times gets one verdict. A
// trigger that ends without a verdict (the debit account unknown without pre-set data) uses
// nothing up; the one that ends in a verdict names the deferred record and occurrence 1; every
// later trigger is refused with 409 deferred_consumed, recording nothing.
func TestOneOffTriggerRunsOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	d := deferIntent(t, e, "scheduled", "c_once")

	body := fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q}`, d.actionKey)
	status, out := do(t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", []byte(body))
	_, r, _ := decodeTriggerAnswer(t, status, out)
	if r == nil || r.Outcome == "verdict_issued" || r.Deferred == nil || r.Deferred.RecordID != d.recordID || r.Deferred.Occurrence != 1 {
		t.Fatalf("trigger without pre-set data: %d %s", status, out)
	}
	records := len(e.records())
	var verdicts int
	for i := range 3 {
		status, r, code := e.trigger(d.actionKey)
		switch {
		case i == 0 && (r == nil || r.Outcome != "verdict_issued" || r.Deferred == nil || r.Deferred.RecordID != d.recordID ||
			r.Deferred.Occurrence != 1 || r.Deferred.Allowed != 1):
			t.Fatalf("first trigger with pre-set data: %d %v %s", status, r, code)
		case i > 0 && (status != http.StatusConflict || code != api.CodeDeferredConsumed):
			t.Fatalf("trigger %d: %d %v %s, want 409 %s", i+1, status, r, code, api.CodeDeferredConsumed)
		}
		if r != nil && r.Verdict != nil {
			verdicts++
		}
	}
	if verdicts != 1 {
		t.Fatalf("%d verdicts from three triggers", verdicts)
	}
	if got := len(e.records()); got != records+1 {
		t.Fatalf("%d records after the triggers, want %d: a refused trigger records nothing", got, records+1)
	}
	if got := e.metric(`verdictd_trigger_refusals_total{reason="deferred_consumed"}`); got != 2 {
		t.Fatalf("deferred_consumed refusals: %v", got)
	}
	// Deferring the action again is a new instruction of the user's: a new record, triggered
	// once more.
	d2 := deferIntent(t, e, "scheduled", "c_once_again")
	if d2.recordID == d.recordID {
		t.Fatal("the second deferral reused the record")
	}
	if _, r, code := e.trigger(d2.actionKey); r == nil || r.Outcome != "verdict_issued" || r.Deferred.RecordID != d2.recordID {
		t.Fatalf("trigger of the new deferral: %v %s", r, code)
	}
}

// TestConcurrentTriggersOneVerdict: many triggers of one scheduled intent at once yield
// exactly one verdict; the rest are refused deferred_consumed.
func TestConcurrentTriggersOneVerdict(t *testing.T) {
	e := newEnv(t, envOpts{})
	d := deferIntent(t, e, "scheduled", "c_race")
	assertOneVerdict(t, []*env{e}, d, 16)
}

// TestEtcdConcurrentTriggersOneVerdict: replicas sharing etcd, triggered at once on both: the
// consume is one compare-and-swap with the verdict's commit, so exactly one verdict is issued
// across the deployment.
func TestEtcdConcurrentTriggersOneVerdict(t *testing.T) {
	rs := newReplicas(t, etcdtest.Start(t), 2, envOpts{})
	d := deferIntent(t, rs[0], "scheduled", "c_race")
	assertOneVerdict(t, rs, d, 16)
}

// assertOneVerdict sends n triggers of d at once, spread over es, and requires exactly one
// verdict and n-1 deferred_consumed refusals.
func assertOneVerdict(t *testing.T, es []*env, d deferred, n int) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			status, out := do(t, "POST", es[i%len(es)].srv.URL+"/v1/preflight", callerToken, "application/json", triggerBody(d.actionKey))
			_, r, code := decodeTriggerAnswer(t, status, out)
			mu.Lock()
			defer mu.Unlock()
			if r != nil {
				got[r.Outcome]++
				return
			}
			got[fmt.Sprint(status, " ", code)]++
		})
	}
	close(start)
	wg.Wait()
	want := map[string]int{"verdict_issued": 1, fmt.Sprint(http.StatusConflict, " ", api.CodeDeferredConsumed): n - 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}

// recurringPolicy bounds recurring schedule_transfer intents to two verdicts an hour apart.
var recurringPolicy = strings.Replace(bankPolicy, "    pending_at_trigger: []\n",
	"    pending_at_trigger: []\n    recurrence: {count: 2, interval: 1h}\n", 1)

// TestRecurringTriggerBounds: a recurring intent runs as its policy's recurrence allows: a
// trigger within the interval of the previous verdict is refused recurrence_too_soon, one
// after it is occurrence 2, and the third is refused recurrence_exhausted. The clock is the
// service's own, moved by the test.
func TestRecurringTriggerBounds(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnv(t, envOpts{policy: recurringPolicy, now: now})
	d := deferIntent(t, e, "recurring", "c_rec")

	steps := []struct {
		advance    time.Duration
		status     int
		code       string
		occurrence int
	}{
		{0, 200, "", 1},
		{30 * time.Minute, 409, api.CodeRecurrenceTooSoon, 0},
		{31 * time.Minute, 200, "", 2},
		{2 * time.Hour, 409, api.CodeRecurrenceExhausted, 0},
	}
	for i, st := range steps {
		offset.Add(int64(st.advance))
		status, r, code := e.trigger(d.actionKey)
		if status != st.status || code != st.code {
			t.Fatalf("step %d: %d %s, want %d %s", i, status, code, st.status, st.code)
		}
		if st.occurrence > 0 && (r.Outcome != "verdict_issued" || r.Deferred == nil || r.Deferred.Occurrence != st.occurrence || r.Deferred.Allowed != 2) {
			t.Fatalf("step %d: %s\n%s", i, r.Outcome, r.raw)
		}
	}
}

// TestRecurringNeedsRecurrence: without a recurrence in the policy a recurring request is never
// deferred: the timing is not allowed, and the user is asked for it again at instruction time.
// A recurring intent deferred while the policy had one is refused at trigger time once the
// policy no longer does.
func TestRecurringNeedsRecurrence(t *testing.T) {
	e := newEnv(t, envOpts{})
	req := map[string]any{
		"principal": "u_01", "conversation_id": "c_norec", "server": "bank", "tool": "schedule_transfer",
		"instruction": []map[string]any{{"text": "schedule a transfer of 50,000 won to 110-222-333", "trust": "user"}},
		"intent":      map[string]any{"when_case": "recurring", "action_name": map[string]any{"segment": 0, "span": []int{0, 19}}},
	}
	r := e.preflight(req)
	if r.Outcome == "deferred" || r.Gate.Kind != "intent_undetermined" {
		t.Fatalf("recurring without a recurrence: %s %s\n%s", r.Outcome, r.Gate.Kind, r.raw)
	}

	rec := newEnv(t, envOpts{policy: recurringPolicy})
	d := deferIntent(t, rec, "recurring", "c_rec")
	rec.writePolicy(strings.Replace(bankPolicy, `"2026-11-30.1"`, `"2026-11-30.2"`, 1), "")
	waitFor(t, func() bool { return rec.metric(`verdictd_policy_info{version="2026-11-30.2"}`) == 1 })
	if status, _, code := rec.trigger(d.actionKey); status != http.StatusConflict || code != api.CodeRecurrenceNotConfigured {
		t.Fatalf("trigger after the recurrence was removed: %d %s", status, code)
	}
}
