package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

func TestApprove(t *testing.T) {
	mux := http.NewServeMux()
	reply := func(status int, ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	var got Request
	mux.HandleFunc("/judge", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, "body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, `{"approved": %t, "reason": "judged", "extra": 1}`, got.Normalized == "move my savings")
	})
	mux.HandleFunc("/true", reply(200, "application/json", `{"approved":true}`))
	mux.HandleFunc("/error", reply(500, "application/json", `{"approved":true}`))
	mux.HandleFunc("/created", reply(201, "application/json", `{"approved":true}`))
	mux.HandleFunc("/string", reply(200, "application/json", `{"approved":"true"}`))
	mux.HandleFunc("/null", reply(200, "application/json", `{"approved":null}`))
	mux.HandleFunc("/missing", reply(200, "application/json", `{"ok":true}`))
	mux.HandleFunc("/dup", reply(200, "application/json", `{"approved":false,"approved":true}`))
	// encoding/json matches member names ignoring case: "Approved" is not the member the
	// contract names, and must not overrule "approved".
	mux.HandleFunc("/case", reply(200, "application/json", `{"approved":false,"Approved":true}`))
	mux.HandleFunc("/upper", reply(200, "application/json", `{"APPROVED":true}`))
	mux.HandleFunc("/text", reply(200, "text/plain", `{"approved":true}`))
	mux.HandleFunc("/garbage", reply(200, "application/json", `{"approved":true`))
	mux.HandleFunc("/huge", reply(200, "application/json", `{"approved":true,"pad":"`+strings.Repeat("x", 1<<17)+`"}`))
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/true", http.StatusTemporaryRedirect)
	})
	release := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	tests := []struct {
		path     string
		action   string
		approved bool
		err      bool
	}{
		{"/judge", "move my savings", true, false},
		{"/judge", "delete everything", false, false},
		{"/true", "x", true, false},
		{"/error", "x", false, true},
		{"/created", "x", false, true},
		{"/string", "x", false, true},
		{"/null", "x", false, true},
		{"/missing", "x", false, true},
		{"/dup", "x", false, true},
		{"/case", "x", false, true},
		{"/upper", "x", false, true},
		{"/text", "x", false, true},
		{"/garbage", "x", false, true},
		{"/huge", "x", false, true},
		{"/redirect", "x", false, true},
		{"/slow", "x", false, true},
	}
	a := New(Options{Timeout: 200 * time.Millisecond})
	for _, tt := range tests {
		t.Run(tt.path+"/"+tt.action, func(t *testing.T) {
			pt := &policy.Tool{Actions: []string{"send money"}, Approver: &policy.Approver{Webhook: srv.URL + tt.path}}
			ap, err := a.Approve(context.Background(), gates.ApprovalRequest{Principal: "u", Server: "bank", Tool: "transfer",
				UserActionName: tt.action, Normalized: gates.Normalize(tt.action), Policy: pt})
			if (err != nil) != tt.err || ap.Approved != tt.approved {
				t.Fatalf("approval %+v, err %v", ap, err)
			}
			if ap.Approved && ap.By != "webhook" {
				t.Fatalf("approved by %q", ap.By)
			}
		})
	}
	if got.Tool != "transfer" || got.UserActionName != "delete everything" || len(got.Actions) != 1 {
		t.Errorf("webhook saw %+v", got)
	}
	for _, pt := range []*policy.Tool{nil, {}, {Approver: &policy.Approver{Webhook: "file:///x"}}} {
		if ap, err := a.Approve(context.Background(), gates.ApprovalRequest{Policy: pt}); err == nil || ap.Approved {
			t.Errorf("policy %+v: approved without a webhook", pt)
		}
	}
	if _, err := a.Approve(context.Background(), gates.ApprovalRequest{Policy: &policy.Tool{Approver: &policy.Approver{Webhook: srv.URL + "/string"}}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("malformed reply: %v", err)
	}
}

// The engine passes C3 through a real webhook only on its explicit approval; a failing webhook
// leaves the tool undetermined, with a message that never names the tool.
func TestEngineWithWebhook(t *testing.T) {
	approve := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !approve {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		io.WriteString(w, `{"approved":true,"reason":"moving savings is a transfer"}`)
	}))
	defer srv.Close()
	pol, err := policy.Parse([]byte(`
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/transfer: {actions: ["send money"], approver: {webhook: "` + srv.URL + `/c3"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := gates.New(gates.Config{State: gates.NewMemState(), Webhook: New(Options{})})
	if err != nil {
		t.Fatal(err)
	}
	req, err := gates.DecodeRequest([]byte(`{"principal":"u","server":"bank","tool":"transfer",
		"instruction":[{"text":"move my savings","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,15]}}}`), gates.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tool := gates.Tool{Name: "transfer", InputSchema: json.RawMessage(`{"type":"object"}`)}
	for _, ok := range []bool{true, false} {
		approve = ok
		rec, err := eng.Run(context.Background(), gates.Input{Tool: tool, Policy: pol, Request: req})
		if err != nil {
			t.Fatal(err)
		}
		m := rec.Fixed.C3Match
		switch {
		case ok && (!m.Approved || m.By != "webhook" || rec.Outcome != api.OutcomeVerdictIssued):
			t.Fatalf("approved webhook: %+v, outcome %s", m, rec.Outcome)
		case !ok && (m.Approved || rec.Gate.Kind != api.GateToolUndetermined || strings.Contains(rec.Gate.UserMessage, "transfer")):
			t.Fatalf("failing webhook: %+v, gate %+v", m, rec.Gate)
		}
	}
}
