package mcpgate_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/otlptest"
)

// One gated call from a host that sends W3C trace context in _meta is one trace of the
// gateway's: each tools/call span of the call starts a trace of its own, linked to the host's
// span (the host does not choose the trace id the records name, another user's say), and
// verdictd's preflights and the executor's execution hang under the gateway's, all received by
// a real OTLP receiver; both records carry the gateway's trace id, and the tool server receives
// that trace context with the call. The daemons are turned on by the standard
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variable alone, and verdictd trusts the gateway for its
// trace context.
func TestOneTraceAcrossTheDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("runs verdictd, the executor, the bank and the gateway")
	}
	bank := bankStack(t)
	recv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", recv.URL)
	dir, err := os.MkdirTemp("", "mcpgate-trace-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog}
	// verdictd and the executor continue the gateway's trace only for a caller trusted for
	// tracing.
	s.verdictdConfig = map[string]any{"callers": []map[string]any{
		{"name": "gateway", "token_sha256": httpx.HashToken(agentToken), "principals": []string{"*"}, "trust_trace_context": true},
		{"name": "executor", "token_sha256": httpx.HashToken(execToken), "principals": []string{}}}}
	s.executorConfig = map[string]any{"callers": []map[string]any{
		{"name": "gateway", "token_sha256": httpx.HashToken(agentToken), "trust_trace_context": true}}}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
	mark := s.mark(t)

	const hostTrace, hostSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs(),
		Meta: mcp.Meta{"traceparent": "00-" + hostTrace + "-" + hostSpan + "-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("call failed: %s %v", text(res), res.Meta)
	}
	recID, _ := res.Meta[api.MetaRecordID].(string)
	exeID, _ := res.Meta[api.MetaExecutionRecord].(string)
	traceID, _ := s.record(t, recID)["trace_id"].(string)
	if len(traceID) != 32 || traceID == hostTrace {
		t.Fatalf("decision record trace_id %q: want the gateway's own, not the host's %s", traceID, hostTrace)
	}
	if got := execution(t, s, exeID)["trace_id"]; got != traceID {
		t.Errorf("execution record trace_id %v, want %s", got, traceID)
	}
	transfers := only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Traceparent, traceID) {
		t.Errorf("the bank's transfer carried traceparent %+v, want one in trace %s", transfers, traceID)
	}

	want := map[string]string{"mcpgate": "tools/call bank.transfer", "verdictd": "preflight", "executor": "execute"}
	spans := recv.Wait(t, "spans of all three daemons", func(spans []otlptest.Span) bool {
		seen := map[string]bool{}
		for _, sp := range spans {
			if sp.TraceID == traceID && want[sp.Service] == sp.Name {
				seen[sp.Service] = true
			}
		}
		return len(seen) == len(want)
	})
	// A 2026-07-28 host answers a question by calling again: each round is a tools/call span
	// beginning a trace of its own, linked to the host's span, and the last one carries the
	// record that ran.
	calls := map[string]otlptest.Span{}
	for _, sp := range spans {
		if sp.TraceID == hostTrace {
			t.Errorf("span %s of %s in the host's trace", sp.Name, sp.Service)
		}
		if sp.Service == "mcpgate" && sp.Name == want["mcpgate"] {
			calls[sp.SpanID] = sp
			linked := len(sp.Links) == 1 && sp.Links[0].TraceID == hostTrace && sp.Links[0].SpanID == hostSpan
			if sp.ParentSpanID != "" || !linked || sp.Attrs["gen_ai.tool.name"] != "bank.transfer" {
				t.Errorf("the gateway's span: %+v", sp)
			}
		}
		for k, v := range sp.Attrs {
			for _, leak := range []string{"110-222-333", "1102534471", userToken, "eyJ"} {
				if strings.Contains(v, leak) {
					t.Errorf("span %s attribute %s=%q carries a value or a token", sp.Name, k, v)
				}
			}
		}
	}
	ran := false
	for _, c := range calls {
		ran = ran || c.Attrs["verdict.record_id"] == recID && c.TraceID == traceID
	}
	if !ran {
		t.Errorf("no gateway span of trace %s names the record %s: %+v", traceID, recID, calls)
	}
	// verdictd's and the executor's server spans hang under one of the gateway's call spans.
	for _, sp := range spans {
		if (sp.Service == "verdictd" && sp.Name == "preflight") || (sp.Service == "executor" && sp.Name == "execute") {
			if c, ok := calls[sp.ParentSpanID]; !ok || c.TraceID != sp.TraceID {
				t.Errorf("%s %s has parent %s, not one of the gateway's call spans", sp.Service, sp.Name, sp.ParentSpanID)
			}
		}
	}
}

func execution(t *testing.T, s *stack, id string) map[string]any {
	t.Helper()
	return adminGet(t, s.executor+"/v1/executions/"+id)
}
