package verdictd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/otlptest"
	"github.com/verdictgate/verdict/internal/tracing"
)

// tracedRecord is what the tests read of a record.
type tracedRecord struct {
	RecordID string `json:"record_id"`
	Outcome  string `json:"outcome"`
	TraceID  string `json:"trace_id"`
}

// preflightIn posts a preflight as the test caller with the traceparent of traceID and parent.
func preflightIn(t *testing.T, e *env, traceID, parent string) tracedRecord {
	t.Helper()
	body, _ := json.Marshal(landlord())
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/preflight", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+callerToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var rec tracedRecord
	if err := json.NewDecoder(res.Body).Decode(&rec); err != nil || res.StatusCode != http.StatusOK || rec.RecordID == "" {
		t.Fatalf("preflight: %s %v %+v", res.Status, err, rec)
	}
	return rec
}

// A preflight whose caller is trusted for tracing and sends W3C trace context is traced under
// it: its record carries the trace id, and the receiver gets the preflight span, a child of the
// caller's, with the commit beneath it, and no argument value in any attribute.
func TestPreflightTraced(t *testing.T) {
	recv := otlptest.New(t)
	e := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Tracing = &tracing.Config{Endpoint: recv.URL}
		c.Callers[0].TrustTraceContext = true
	}})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := preflightIn(t, e, traceID, parent)
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

// A caller not trusted for tracing does not choose its record's trace id by the traceparent it
// sends (another user's trace, say): traced, the preflight starts a trace of its own, which the
// record carries, and links the caller's span; untraced, the record carries no trace id.
func TestPreflightTraceNotChosenByCaller(t *testing.T) {
	const chosen, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, traced := range []bool{true, false} {
		t.Run(map[bool]string{true: "traced", false: "untraced"}[traced], func(t *testing.T) {
			recv := otlptest.New(t)
			e := newEnv(t, envOpts{mutate: func(c *Config) {
				if traced {
					c.Tracing = &tracing.Config{Endpoint: recv.URL}
				}
			}})
			rec := preflightIn(t, e, chosen, parent)
			if rec.TraceID == chosen {
				t.Fatalf("the record carries the trace id its caller chose")
			}
			var stored tracedRecord
			status, body := do(t, "GET", e.srv.URL+"/v1/records/"+rec.RecordID, adminToken, "", nil)
			if err := json.Unmarshal(body, &stored); status != http.StatusOK || err != nil || stored.TraceID != rec.TraceID {
				t.Fatalf("the stored record: %d %v, trace id %q, want %q", status, err, stored.TraceID, rec.TraceID)
			}
			if !traced {
				if rec.TraceID != "" {
					t.Errorf("untraced, the record carries trace id %q", rec.TraceID)
				}
				return
			}
			if len(rec.TraceID) != 32 {
				t.Fatalf("record trace_id %q, want verdictd's own", rec.TraceID)
			}
			e.stop()
			spans := recv.Wait(t, "the preflight span", func(s []otlptest.Span) bool {
				return slices.ContainsFunc(s, func(sp otlptest.Span) bool { return sp.Name == "preflight" })
			})
			for _, sp := range spans {
				if sp.TraceID == chosen {
					t.Errorf("span %s is in the trace the caller chose", sp.Name)
				}
				if sp.Name != "preflight" {
					continue
				}
				want := []otlptest.Link{{TraceID: chosen, SpanID: parent, Attrs: map[string]string{"verdict.link": "caller"}}}
				if sp.TraceID != rec.TraceID || sp.ParentSpanID != "" || !reflect.DeepEqual(sp.Links, want) {
					t.Errorf("preflight span in trace %s, parent %q, links %+v; want a root in %s linking the caller's %+v",
						sp.TraceID, sp.ParentSpanID, sp.Links, rec.TraceID, want)
				}
			}
		})
	}
}
