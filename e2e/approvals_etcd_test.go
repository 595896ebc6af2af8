package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/approvals"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/keys"
)

// TestApprovalsEtcdReplicas runs two verdictd processes sharing one etcd, with the OpenID
// Provider's approver tokens and an approval webhook that approves. A transfer's approval
// created through replica 1 is waited for on replica 2 by the most long polls it takes, which
// all wake when replica 1 decides; the call's next preflight, through replica 2, uses it, and
// the same call through replica 1 after that creates a new approval rather than using it
// again. Ten decisions of one approval racing across the replicas record one. The webhook is
// asked once per approval, whichever replica created it. A decision posted while etcd is
// frozen is refused 503 store_unavailable; once etcd is back the approval is decided once and
// used once.
func TestApprovalsEtcdReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs two verdictd, etcd and the OpenID Provider")
	}
	srv := etcdtest.NewServer(t)
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers")
	var (
		mu    sync.Mutex
		posts = map[string]int{} // approval id → webhook requests
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a api.Approval
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &a); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		posts[a.ApprovalID]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"decision":"approve","arguments_digest":%q,"reason":"within limits"}`, a.ArgumentsDigest)
	}))
	t.Cleanup(hook.Close)
	pol := strings.Replace(approvalPolicy, "%HOOK%", hook.URL+"/decide", 1)
	pol = strings.Replace(pol, "use_within: 10s", "use_within: 10m", 1)
	stateStore := map[string]any{"kind": "etcd", "endpoints": []string{srv.Endpoint}, "prefix": "/e2e-approvals/",
		"request_timeout": "500ms"}
	var gs []*gateConfig
	for i := range 2 {
		extra := map[string]any{"state_store": stateStore, "approvers": map[string]any{
			"issuers": []map[string]any{{"issuer": op.Issuer, "audience": approvalsResource}},
		}}
		if i > 0 {
			extra["signing_key"] = filepath.Join(gs[0].dir, "keys", keys.PrivateKeyFile)
		}
		g := newGateConfig(t, pol, extra)
		startVerdictd(t, g)
		gs = append(gs, g)
	}
	ctx := t.Context()
	memberToken := op.AuthCode(t, "test-user2")
	var callers, members [2]*client
	for i, g := range gs {
		callers[i] = newClient(g.addr, callerToken, 30*time.Second)
		members[i] = newClient(g.addr, memberToken, 90*time.Second)
	}
	principalID := identity.PrincipalID(op.Issuer, "id1")

	type record struct {
		Outcome  string              `json:"outcome"`
		Verdict  *string             `json:"verdict"`
		Approval *api.RecordApproval `json:"approval"`
	}
	preflight := func(c *client, tool, conversation string) record {
		t.Helper()
		body := strings.Replace(string(transferRequest(conversation, 900, true)), `"tool":"transfer"`, `"tool":"`+tool+`"`, 1)
		body = strings.Replace(body, `"principal":"`+principal+`"`, `"principal":"`+principalID+`"`, 1)
		r := c.do(ctx, "POST", "/v1/preflight", []byte(body))
		var rec record
		if r.status != 200 || json.Unmarshal(r.body, &rec) != nil {
			t.Fatalf("preflight of %s on %s: %d %s", tool, c.base, r.status, r.body)
		}
		return rec
	}
	pending := func(c *client, tool, conversation string) api.RecordApproval {
		t.Helper()
		rec := preflight(c, tool, conversation)
		if rec.Outcome != api.OutcomeAskUser || rec.Approval == nil || rec.Approval.State != api.ApprovalPending {
			t.Fatalf("preflight of %s on %s: %+v, want a pending approval", tool, c.base, rec)
		}
		return *rec.Approval
	}
	decision := func(d, digest string) []byte {
		return fmt.Appendf(nil, `{"decision":%q,"arguments_digest":%q}`, d, digest)
	}
	get := func(c *client, id, query string) api.Approval {
		t.Helper()
		r := c.do(ctx, "GET", "/v1/approvals/"+id+query, nil)
		var a api.Approval
		if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("approval %s on %s: %d %s", id, c.base, r.status, r.body)
		}
		return a
	}

	// Created through replica 1, waited for on replica 2 by as many long polls as one
	// approval may have: a poll more is refused once they all wait.
	first := pending(callers[0], "transfer", "c_first")
	woken := make(chan api.Approval, approvals.MaxApprovalWaits)
	for range approvals.MaxApprovalWaits {
		go func() {
			for {
				// Refused only while the probe below holds a slot for its millisecond.
				r := members[1].do(ctx, "GET", "/v1/approvals/"+first.ApprovalID+"?wait=60s", nil)
				if r.status == http.StatusTooManyRequests {
					continue
				}
				var a api.Approval
				json.Unmarshal(r.body, &a)
				woken <- a
				return
			}
		}()
	}
	waitFor(t, "every long poll waiting on replica 2", func() bool {
		r := members[1].do(ctx, "GET", "/v1/approvals/"+first.ApprovalID+"?wait=1ms", nil)
		return r.status == http.StatusTooManyRequests && r.errorCode() == api.CodeTooManyWaits
	})
	if r := members[0].do(ctx, "POST", "/v1/approvals/"+first.ApprovalID, decision("approve", first.ArgumentsDigest)); r.status != 200 {
		t.Fatalf("the decision on replica 1: %d %s", r.status, r.body)
	}
	for range approvals.MaxApprovalWaits {
		if a := <-woken; a.State != api.ApprovalApproved {
			t.Fatalf("a long poll on replica 2 woke with %q, want approved", a.State)
		}
	}
	// Used once: through replica 2, then the same call through replica 1 asks again.
	if rec := preflight(callers[1], "transfer", "c_first"); rec.Outcome != api.OutcomeVerdictIssued || rec.Verdict == nil {
		t.Fatalf("the approved call on replica 2: %+v", rec)
	}
	if a := get(members[0], first.ApprovalID, ""); a.State != api.ApprovalApproved || a.UsedBy == "" {
		t.Fatalf("the approval after its use, on replica 1: %+v", a)
	}
	if again := pending(callers[0], "transfer", "c_first"); again.ApprovalID == first.ApprovalID {
		t.Fatalf("the call made again on replica 1 reused approval %s", first.ApprovalID)
	}

	// Ten decisions of one approval, racing across the replicas: one is recorded.
	raced := pending(callers[1], "transfer", "c_race")
	statuses := make(chan response, 10)
	for i := range 10 {
		go func() {
			d := "approve"
			if i%2 == 1 {
				d = "deny"
			}
			statuses <- members[i%2].do(ctx, "POST", "/v1/approvals/"+raced.ApprovalID, decision(d, raced.ArgumentsDigest))
		}()
	}
	won := 0
	for range 10 {
		switch r := <-statuses; {
		case r.status == 200:
			won++
		case r.status != http.StatusConflict || r.errorCode() != api.CodeAlreadyDecided:
			t.Errorf("a racing decision: %d %s", r.status, r.body)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing decisions recorded, want 1", won)
	}

	// The webhook: asked once per approval, by the replica that created it.
	var wires []string
	for i := range 4 {
		wires = append(wires, pending(callers[i%2], "wire", fmt.Sprint("c_wire_", i)).ApprovalID)
	}
	for i, id := range wires {
		if a := get(callers[(i+1)%2], id, "?wait=60s"); a.State != api.ApprovalApproved || a.DecidedBy != api.DecidedByWebhook {
			t.Fatalf("wire approval %s: %+v", id, a)
		}
	}
	mu.Lock()
	for _, id := range wires {
		if posts[id] != 1 {
			t.Errorf("approval %s posted to the webhook %d times, want 1", id, posts[id])
		}
	}
	mu.Unlock()

	// etcd frozen during a decision: refused, nothing decided twice, used once.
	frozen := pending(callers[0], "transfer", "c_frozen")
	srv.Freeze()
	r := members[1].do(ctx, "POST", "/v1/approvals/"+frozen.ApprovalID, decision("approve", frozen.ArgumentsDigest))
	srv.Thaw()
	if r.status != http.StatusServiceUnavailable || r.errorCode() != api.CodeStoreUnavailable {
		t.Fatalf("a decision while etcd is frozen: %d %s", r.status, r.body)
	}
	// The write may have reached etcd before it froze: the decision again is recorded, or
	// finds it recorded, once the replicas reach etcd again.
	waitFor(t, "the decision once etcd is back", func() bool {
		r := members[0].do(ctx, "POST", "/v1/approvals/"+frozen.ApprovalID, decision("approve", frozen.ArgumentsDigest))
		switch {
		case r.status == 200 || r.status == http.StatusConflict && r.errorCode() == api.CodeAlreadyDecided:
			return true
		case r.status != http.StatusServiceUnavailable:
			t.Fatalf("the decision once etcd is back: %d %s", r.status, r.body)
		}
		return false
	})
	waitFor(t, "replica 2 reading the approval approved", func() bool {
		r := members[1].do(ctx, "GET", "/v1/approvals/"+frozen.ApprovalID, nil)
		var a api.Approval
		return r.status == 200 && json.Unmarshal(r.body, &a) == nil && a.State == api.ApprovalApproved
	})
	issued := 0
	for _, c := range []*client{callers[1], callers[0]} {
		if rec := preflight(c, "transfer", "c_frozen"); rec.Outcome == api.OutcomeVerdictIssued {
			issued++
		}
	}
	if issued != 1 {
		t.Fatalf("the approved call issued %d verdicts across the replicas, want 1", issued)
	}
}
