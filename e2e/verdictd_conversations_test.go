package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// asPrincipal rewrites the principal of a preflight body.
func asPrincipal(t *testing.T, body []byte, p string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["principal"] = p
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerdictdConversationFlood: one principal inventing conversation ids against the real
// verdictd process holds at most max_conversations_per_principal of them; every further new id
// is refused 429 conversation_limit, leaves no record and is counted, while the principal's
// existing conversations and another principal's preflights are answered.
func TestVerdictdConversationFlood(t *testing.T) {
	const bound, flood = 3, 20
	g := newGateConfig(t, inlinePolicy, map[string]any{"max_conversations_per_principal": bound})
	d := startVerdictd(t, g)
	defer d.stop(t)
	c := newClient(g.addr, callerToken, 30*time.Second)
	post := func(body []byte) response {
		t.Helper()
		return c.do(context.Background(), http.MethodPost, "/v1/preflight", body)
	}

	answered := 0
	for i := range flood {
		// to_account is left to be asked: each preflight counts an ask in a new conversation.
		r := post(transferRequest(fmt.Sprint("flood-", i), 100+i, false))
		switch {
		case i < bound:
			if r.status != http.StatusOK {
				t.Fatalf("conversation %d within the bound: %d %s", i, r.status, r.body)
			}
			answered++
		case r.status != http.StatusTooManyRequests || r.errorCode() != "conversation_limit":
			t.Fatalf("conversation %d beyond the bound: %d %s", i, r.status, r.body)
		}
	}
	// The principal's existing conversation goes on.
	if r := post(transferRequest("flood-0", 100, true)); r.status != http.StatusOK {
		t.Fatalf("existing conversation: %d %s", r.status, r.body)
	} else {
		answered++
	}
	// Another principal is not affected, and is issued its verdict.
	r := post(asPrincipal(t, transferRequest("flood-0", 7, true), "u_02"))
	var rep decisionReply
	if r.status != http.StatusOK || json.Unmarshal(r.body, &rep) != nil || rep.Outcome != "verdict_issued" {
		t.Fatalf("another principal: %d %s", r.status, r.body)
	}
	answered++

	if got := vdEtcdMetricSum(t, g, `verdictd_conversation_refusals_total{reason="conversation_limit"}`); got != flood-bound {
		t.Errorf("conversation_limit refusals counted: %v, want %d", got, flood-bound)
	}
	if recs := vdEtcdRecords(t, g); len(recs) != answered {
		t.Errorf("%d records for %d answered preflights: a refused preflight was recorded", len(recs), answered)
	}
}
