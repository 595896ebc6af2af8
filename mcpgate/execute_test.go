package mcpgate_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// executorStandIn answers POST /v1/execute with whatever answer is set,
// in place of the executor: the answers a real executor never gives (a
// 500, a 200 without a result) and those something between the gateway
// and the executor gives (a proxy's 502 or 503).
type executorStandIn struct {
	mu       sync.Mutex
	status   int
	body     string
	verdicts int // execute requests that carried a verdict
}

func (e *executorStandIn) set(status int, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.body, e.verdicts = status, body, 0
}

func (e *executorStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/readyz" {
		// The gateway is ready only with an executor that is.
		w.Write([]byte(`{"status":"ready"}`))
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/execute" || r.Header.Get("Authorization") != "Bearer "+agentToken {
		http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Verdict   string          `json:"verdict"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":"malformed"}}`, http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if req.Verdict != "" && len(req.Arguments) > 0 {
		e.verdicts++
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	w.Write([]byte(e.body))
}

func (e *executorStandIn) requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.verdicts
}

// TestExecutorAnswerDecidesWhatTheUserIsTold runs gated calls to a
// verdict at the real verdictd and hands them to a stand-in executor.
// Only a refusal with a not_executed record lets the gateway say that
// nothing was done; any answer that does not say what became of the call
// is execution_outcome_unknown, worded as when the executor does not
// answer at all: the tool may have run.
func TestExecutorAnswerDecidesWhatTheUserIsTold(t *testing.T) {
	s := bankStack(t)
	standIn := &executorStandIn{}
	hs := httptest.NewServer(standIn)
	defer hs.Close()
	cfg := s.gatewayConfig(t.TempDir())
	cfg["executor"] = map[string]string{"url": hs.URL, "token": agentToken}
	g := startGateway(t, cfg)
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})

	const (
		unknownText = "The action may or may not have been carried out: the execution service did not answer. It will not be retried automatically; please check before asking again."
		nothingDone = " Nothing was done."
	)
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		wantReason string
		wantText   string
	}{
		{"500", http.StatusInternalServerError,
			`{"error":{"code":"internal","message":"internal error"}}`,
			"execution_outcome_unknown", unknownText},
		{"200 without a result", http.StatusOK,
			`{"execution":{"record_id":"exec_1","actor":"executor","execution_decision":"executed","reason":""}}`,
			"execution_outcome_unknown", unknownText},
		{"200 with nothing", http.StatusOK, `{}`,
			"execution_outcome_unknown", unknownText},
		{"502 without the executor's record", http.StatusBadGateway,
			`{"error":{"code":"bad_gateway"}}`,
			"execution_outcome_unknown", unknownText},
		{"503 without a record", http.StatusServiceUnavailable,
			`{"error":{"code":"shutting_down","message":"the executor is shutting down"}}`,
			"execution_outcome_unknown", unknownText},
		{"403 with a not_executed record", http.StatusForbidden,
			`{"error":{"code":"expired","message":"verdict refused: expired"},"execution":{"record_id":"exec_2","actor":"executor","execution_decision":"not_executed","reason":"expired"}}`,
			"execution_refused", "The action was not carried out: the execution service refused it (expired)." + nothingDone},
		{"403 expired, with when", http.StatusForbidden,
			`{"error":{"code":"expired","message":"verdict refused: expired: the verdict expired at 2026-12-06T10:00:00Z (accepted until 2026-12-06T10:00:05Z with clock_skew 5s); run the preflight again for a new verdict"},"execution":{"record_id":"exec_6","actor":"executor","execution_decision":"not_executed","reason":"expired"}}`,
			"execution_refused", "The action was not carried out: the execution service refused it (expired: the verdict expired at 2026-12-06T10:00:00Z " +
				"(accepted until 2026-12-06T10:00:05Z with clock_skew 5s); run the preflight again for a new verdict)." + nothingDone},
		{"502 with a not_executed record: the server was not reached", http.StatusBadGateway,
			`{"error":{"code":"upstream_unavailable","message":"the tool's server could not be reached and nothing was sent to it; the verdict is used"},"execution":{"record_id":"exec_4","actor":"executor","execution_decision":"not_executed","reason":"upstream_unavailable"}}`,
			"execution_not_sent", "The action was not carried out: the service could not be reached, so nothing was sent to it." + nothingDone},
		{"502 with a not_executed record of another reason", http.StatusBadGateway,
			`{"error":{"code":"tool_error"},"execution":{"record_id":"exec_5","actor":"executor","execution_decision":"not_executed","reason":"tool_error"}}`,
			"execution_outcome_unknown", unknownText},
		{"503 with a not_executed record", http.StatusServiceUnavailable,
			`{"error":{"code":"nonce_store_unavailable","message":"verdict refused: nonce_store_unavailable"},"execution":{"record_id":"exec_3","actor":"executor","execution_decision":"not_executed","reason":"nonce_store_unavailable"}}`,
			"execution_refused", "The action was not carried out: the execution service refused it (nonce_store_unavailable)." + nothingDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			standIn.set(tc.status, tc.body)
			mark := s.mark(t)
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
			if err != nil {
				t.Fatal(err)
			}
			if n := standIn.requests(); n != 1 {
				t.Fatalf("the stand-in executor got %d requests with a verdict, want 1 (result %q %v)", n, text(res), res.Meta)
			}
			if !res.IsError || reason(res) != tc.wantReason {
				t.Fatalf("got isError=%v reason %q (%s), want %s", res.IsError, reason(res), text(res), tc.wantReason)
			}
			if text(res) != tc.wantText {
				t.Errorf("the host was told %q, want %q", text(res), tc.wantText)
			}
			if tc.wantReason == "execution_outcome_unknown" && strings.Contains(text(res), strings.TrimSpace(nothingDone)) {
				t.Errorf("an answer that does not say what became of the call claims nothing was done: %q", text(res))
			}
			if id, _ := res.Meta["io.verdict/record_id"].(string); id == "" {
				t.Errorf("result carries no decision record id: %v", res.Meta)
			}
			if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
				t.Fatalf("bank saw %d transfer calls behind the stand-in executor", n)
			}
		})
	}
}
