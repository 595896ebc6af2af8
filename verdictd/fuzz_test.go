package verdictd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/httpx"
)

func FuzzParseReceiptBody(f *testing.F) {
	f.Add("application/jose", []byte("eyJh.eyJi.c2ln"))
	f.Add("application/json", []byte(`"eyJh.eyJi.c2ln"`))
	f.Add("application/json", []byte(`{"receipt":"eyJh.eyJi.c2ln"}`))
	f.Add("", []byte(`{"receipt":"a","x":1}`))
	f.Add("text/plain", []byte(" \n"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		tok, err := ParseReceiptBody(ct, body)
		if err != nil {
			return
		}
		if tok == "" || len(tok) > 64<<10 {
			t.Fatalf("accepted %q", tok)
		}
		for _, c := range tok {
			if !strings.ContainsRune("-_.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", c) {
				t.Fatalf("token with %q", c)
			}
		}
	})
}

// FuzzPreflight feeds arbitrary bodies to a real service (inline tool, real bbolt file). A body
// is either refused with a 4xx code and nothing stored, or decided; a verdict is only ever
// issued for a record whose arguments digest is the digest of its call arguments.
func FuzzPreflight(f *testing.F) {
	f.Add(oneShotRequest("c1"))
	f.Add([]byte(`{"principal":"u_01","phase":"at_trigger","action_key":"u_01:send money:pay/transfer"}`))
	f.Add([]byte(`{"principal":"u","server":"pay","tool":"transfer","instruction":"send money","intent":{"when_case":"later"}}`))
	f.Add([]byte(`{"principal":"u","server":"pay","tool":"transfer","instruction":[],"candidates":[{"field":"amount","value":1e400}]}`))
	e := newEnv(f, envOpts{policy: inlinePolicy})
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := e.svc.Preflight(context.Background(), body)
		if err != nil {
			var re *gates.RequestError
			var he *httpx.Error
			if !errors.As(err, &re) && !errors.As(err, &he) {
				t.Fatalf("not a request error: %v", err)
			}
			return
		}
		if !json.Valid(res.JSON) {
			t.Fatalf("record is not JSON: %s", res.JSON)
		}
		rec := res.Record
		if rec.Outcome != api.OutcomeVerdictIssued {
			if rec.Verdict != nil || rec.VerdictID != nil {
				t.Fatalf("verdict on a %s record", rec.Outcome)
			}
			return
		}
		d, err := canonical.Digest(rec.CallArguments)
		if err != nil || rec.ArgumentsDigest == nil || d != *rec.ArgumentsDigest || rec.Verdict == nil {
			t.Fatalf("issued record does not bind its arguments: %v %v", d, err)
		}
		if *rec.UnknownCount != 0 || len(rec.Unmet) != 0 {
			t.Fatalf("verdict with open items")
		}
	})
}

// FuzzTrigger sends arbitrary bodies, most of them trigger requests of one deferred scheduled
// transfer in every spelling, to a real service: however many are decided, the deferred record
// is run to at most one verdict, every verdict of a trigger run names its occurrence, and a
// refusal is a request error.
func FuzzTrigger(f *testing.F) {
	e := newEnv(f, envOpts{})
	d := deferIntent(f, e, "scheduled", "c_fuzz")
	for _, s := range []string{
		string(triggerBody(d.actionKey)),
		fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q}`, d.actionKey),
		fmt.Sprintf(`{"principal":"u_01","phase":"at_tr\u0069gger","action_key":%q,"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, d.actionKey),
		fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q,"conversation_id":"c_fuzz","server":"bank","tool":"schedule_transfer","pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, d.actionKey),
		fmt.Sprintf(`{"principal":"u_01","phase":"at_trigger","action_key":%q,"user_answers":[{"question_id":"q_x","approved":true}],"pre_set_data":{"from_account":{"value":"1102534471","trust":"user"}}}`, d.actionKey),
	} {
		f.Add([]byte(s))
	}
	var mu sync.Mutex
	verdicts := 0
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := e.svc.Preflight(context.Background(), body)
		if err != nil {
			var re *gates.RequestError
			var he *httpx.Error
			if !errors.As(err, &re) && !errors.As(err, &he) {
				t.Fatalf("not a request error: %v", err)
			}
			return
		}
		rec := res.Record
		if rec.Outcome != api.OutcomeVerdictIssued || rec.ActionKey == nil || *rec.ActionKey != d.actionKey {
			return
		}
		if rec.Occurrence == nil || rec.Occurrence.RecordID != d.recordID || rec.Occurrence.Occurrence != 1 {
			t.Fatalf("trigger verdict without its occurrence: %s", res.JSON)
		}
		mu.Lock()
		defer mu.Unlock()
		if verdicts++; verdicts > 1 {
			t.Fatalf("deferred record %s run to %d verdicts", d.recordID, verdicts)
		}
	})
}
