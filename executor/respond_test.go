package executor

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/store"
)

// The response is assembled from bytes encoded earlier; it must stay byte for byte what
// encoding/json writes for ExecuteResponse.
func TestRespondMatchesEncodingJSON(t *testing.T) {
	rec := &store.Execution{RecordID: "exe_01", ExecutorID: "executor-bank", VerdictID: "jti", ActionKey: "u_01:send <money> & more:bank/transfer",
		Principal: "u_01", Server: "bank", Tool: "transfer", ArgumentsDigest: "sha256:ab", Decision: store.Executed,
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
		name string
		out  outcome
		want ExecuteResponse
	}{
		{"executed", outcome{status: 200, rec: rec, recJSON: recJSON, result: resultJSON, receipt: "eyJh.eyJp.c2ln-_"},
			ExecuteResponse{Execution: rec, Result: result, Receipt: "eyJh.eyJp.c2ln-_"}},
		{"no stored bytes", outcome{status: 502, rec: rec, result: resultJSON, receipt: "odd \"receipt\" <>"},
			ExecuteResponse{Execution: rec, Result: result, Receipt: "odd \"receipt\" <>"}},
		{"no result, no receipt", outcome{status: 504, rec: rec, recJSON: recJSON},
			ExecuteResponse{Execution: rec}},
	}
	for _, tt := range tests {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		(&Service{}).respond(got, tt.out)
		httpx.WriteJSON(want, tt.out.status, tt.want)
		if got.Body.String() != want.Body.String() {
			t.Errorf("%s: body\n got %s\nwant %s", tt.name, got.Body, want.Body)
		}
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") ||
			got.Header().Get("Cache-Control") != want.Header().Get("Cache-Control") {
			t.Errorf("%s: status or headers differ: %d %v / %d %v", tt.name, got.Code, got.Header(), want.Code, want.Header())
		}
	}
}
