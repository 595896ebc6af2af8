package executor

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
)

// The answer is written from parts encoded earlier (the record as stored, the tool's result);
// read as api.ExecuteAnswer it holds exactly those parts and the receipt, with the status and
// headers of every JSON answer.
func TestRespondWritesTheAnswer(t *testing.T) {
	rec := &api.ExecutionRecord{RecordID: "exe_01", ExecutorID: "executor-bank", VerdictID: "jti", ActionKey: "u_01:send <money> & more:bank/transfer",
		Principal: "u_01", Server: "bank", Tool: "transfer", ArgumentsDigest: "sha256:ab", Decision: api.ExecutionExecuted,
		StartedAt: time.Date(2026, 11, 30, 9, 0, 0, 123, time.FixedZone("x", 3600)), FinishedAt: time.Date(2026, 11, 30, 8, 0, 1, 0, time.UTC),
		ResultDigest: "sha256:cd", Verdict: "eyJ.eyJ.sig"}
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok <b>&</b> \u2028 é"}}, IsError: true}
	recJSON, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	resultJSON, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		out     outcome
		receipt string
		result  bool
	}{
		{"executed", outcome{status: 200, rec: rec, recJSON: recJSON, result: resultJSON, receipt: "eyJh.eyJp.c2ln-_"}, "eyJh.eyJp.c2ln-_", true},
		{"no stored bytes", outcome{status: 502, rec: rec, result: resultJSON, receipt: "odd \"receipt\" <>"}, "odd \"receipt\" <>", true},
		{"no result, no receipt", outcome{status: 504, rec: rec, recJSON: recJSON}, "", false},
	}
	for _, tt := range tests {
		got := httptest.NewRecorder()
		(&Service{}).respond(got, tt.out)
		if got.Code != tt.out.status || got.Header().Get("Content-Type") != "application/json" || got.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: status or headers: %d %v", tt.name, got.Code, got.Header())
		}
		var ans api.ExecuteAnswer
		if err := json.Unmarshal(got.Body.Bytes(), &ans); err != nil {
			t.Fatalf("%s: %v: %s", tt.name, err, got.Body)
		}
		var back api.ExecutionRecord
		wire, _ := json.Marshal(ans.Execution)
		if err := back.UnmarshalJSON(wire); err != nil || back.RecordID != rec.RecordID || back.ActionKey != rec.ActionKey ||
			!back.FinishedAt.Equal(rec.FinishedAt) || back.Verdict != rec.Verdict {
			t.Errorf("%s: execution %+v (%v), want %+v", tt.name, back, err, rec)
		}
		// The result is the same JSON value (its escapes may be written otherwise): the same
		// canonical digest the record's result_digest holds.
		if tt.result != (ans.Result != nil) {
			t.Errorf("%s: result %s, want %v", tt.name, ans.Result, tt.result)
		} else if tt.result {
			got, err1 := canonical.DigestJSON(ans.Result)
			want, err2 := canonical.DigestJSON(resultJSON)
			if err1 != nil || err2 != nil || got != want {
				t.Errorf("%s: result %s, want %s", tt.name, ans.Result, resultJSON)
			}
		}
		if ans.Receipt != tt.receipt || ans.Error != nil {
			t.Errorf("%s: receipt %q error %v, want %q", tt.name, ans.Receipt, ans.Error, tt.receipt)
		}
	}
}
