package verdictd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/otlptest"
	"github.com/verdictgate/verdict/internal/tracing"
)

// A preflight that arrives with W3C trace context is traced under it: its record carries the
// trace id, and the receiver gets the preflight span, a child of the caller's, with the commit
// beneath it, and no argument value in any attribute.
func TestPreflightTraced(t *testing.T) {
	recv := otlptest.New(t)
	e := newEnv(t, envOpts{mutate: func(c *Config) { c.Tracing = &tracing.Config{Endpoint: recv.URL} }})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(landlord())
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/preflight", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+callerToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		RecordID string `json:"record_id"`
		Outcome  string `json:"outcome"`
		TraceID  string `json:"trace_id"`
	}
	json.NewDecoder(res.Body).Decode(&rec)
	res.Body.Close()
	if rec.TraceID != traceID {
		t.Fatalf("record trace_id %q, want %q", rec.TraceID, traceID)
	}
	e.stop() // flushes the exporter
	spans := recv.Wait(t, "the preflight and commit spans", func(s []otlptest.Span) bool {
		var pre, commit, stored bool
		for _, sp := range s {
			pre = pre || sp.Name == "preflight"
			commit = commit || sp.Name == "commit"
			stored = stored || sp.Name == "store record"
		}
		return pre && commit && stored
	})
	byName := map[string]otlptest.Span{}
	for _, sp := range spans {
		if sp.TraceID != traceID || sp.Service != "verdictd" {
			t.Errorf("span %s in trace %s of %s", sp.Name, sp.TraceID, sp.Service)
		}
		for k, v := range sp.Attrs {
			if strings.Contains(v, "500000") || strings.Contains(v, "landlord") || k == "enduser.id" {
				t.Errorf("span %s attribute %s=%q carries a value or a principal", sp.Name, k, v)
			}
		}
		byName[sp.Name] = sp
	}
	pre := byName["preflight"]
	if pre.ParentSpanID != parent || pre.Attrs["verdict.record_id"] != rec.RecordID || pre.Attrs["verdict.outcome"] != rec.Outcome ||
		pre.Attrs["gen_ai.tool.name"] != "transfer" {
		t.Errorf("preflight span: %+v", pre)
	}
	for _, name := range []string{"commit", "store record"} {
		if byName[name].ParentSpanID != pre.SpanID {
			t.Errorf("%s span's parent %q, want the preflight's %s", name, byName[name].ParentSpanID, pre.SpanID)
		}
	}
}
