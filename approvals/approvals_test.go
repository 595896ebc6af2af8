package approvals

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// testPolicy gates bank/transfer with an approval only the console gives, by another person
// than the principal, of the payments-approvers group. Nothing here lists the server's tools:
// the harness says what the transfer's definition digest is.
const testPolicy = `policy_version: "v1"
servers:
  bank:
    audience: [executor-bank]
    tools_from: {command: ["bank"]}
tools:
  bank/transfer:
    class: irreversible
    actions: ["pay"]
    fields:
      to_account: {allowed_sources: [user_answer, instruction], confirm: true}
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}
`

// harness is a Service on a real bbolt file under testPolicy, the transfer's definition of
// digest sha256:def1, and its approvals API, whose every request is a caller's acting for
// every principal.
type harness struct {
	s   *Service
	pol *policy.Policy
	srv *httptest.Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "approvals.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Keeper: db.Approvals(), Now: time.Now, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		InForce: func(string, string) (*policy.Policy, string) { return pol, "sha256:def1" },
		Authenticate: func(*http.Request) (*Viewer, error) {
			return &Viewer{ActsFor: func(string) bool { return true }}, nil
		}})
	t.Cleanup(s.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/approvals", s.HandleList)
	mux.HandleFunc("GET /v1/approvals/{id}", s.HandleGet)
	mux.HandleFunc("POST /v1/approvals/{id}", s.HandleDecide)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &harness{s: s, pol: pol, srv: srv}
}

// TestWebhookBoundsDefault: without approval_webhooks, the webhook requests wait in a queue of
// DefaultWebhookQueue approvals.
func TestWebhookBoundsDefault(t *testing.T) {
	if got := cap(newHarness(t).s.webhooks.queue); got != DefaultWebhookQueue {
		t.Errorf("queue of %d, want %d", got, DefaultWebhookQueue)
	}
}

// put stores a as it is, new.
func (h *harness) put(t *testing.T, a *storedApproval) {
	t.Helper()
	if a.Approval.CreatedAt == "" {
		a.Approval.CreatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	enc, err := encodeApproval(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.keeper.Write(t.Context(), &store.ApprovalWrite{Meta: a.meta(), Value: enc}); err != nil {
		t.Fatal(err)
	}
}

// get asks the approvals API for path, and returns the status, the error envelope's code and
// the approval a 200 answers.
func (h *harness) get(t *testing.T, path string) (int, string, api.Approval) {
	t.Helper()
	resp, err := http.Get(h.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb api.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
			t.Fatalf("GET %s: %d, not an error envelope: %v", path, resp.StatusCode, err)
		}
		return resp.StatusCode, eb.Error.Code, api.Approval{}
	}
	var a api.Approval
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, "", a
}
