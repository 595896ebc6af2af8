package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSetupIsOffUnlessAsked(t *testing.T) {
	ctx := context.Background()
	ratio := 0.5
	for name, tc := range map[string]struct {
		cfg     *Config
		env     map[string]string
		enabled bool
	}{
		"nothing":               {nil, nil, false},
		"config":                {&Config{Endpoint: "http://127.0.0.1:4318/v1/traces", SampleRatio: &ratio}, nil, true},
		"environment":           {nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		"traces environment":    {nil, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		"disabled wins":         {&Config{}, map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		"disabled wins the env": {nil, map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := Setup(ctx, tc.cfg, "verdictd", env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(ctx)
			if tr.Enabled() != tc.enabled {
				t.Errorf("enabled = %v, want %v", tr.Enabled(), tc.enabled)
			}
		})
	}
}

// TestAttrsSayWhereSpansGo checks what a daemon logs at start about tracing: off and why, or
// the URL spans go to (without a password), what named it and the sample ratio.
func TestAttrsSayWhereSpansGo(t *testing.T) {
	ctx := context.Background()
	ratio := 0.25
	tests := []struct {
		name string
		cfg  *Config
		env  map[string]string
		want map[string]any
	}{
		{"off", nil, nil, map[string]any{"enabled": false, "reason": "no tracing section and no OTEL_EXPORTER_OTLP endpoint"}},
		{"disabled", &Config{}, map[string]string{"OTEL_SDK_DISABLED": "true"}, map[string]any{"enabled": false, "reason": "OTEL_SDK_DISABLED"}},
		{"config", &Config{Endpoint: "https://collector.example:4318/v1/traces", SampleRatio: &ratio},
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318"},
			map[string]any{"enabled": true, "endpoint": "https://collector.example:4318/v1/traces", "endpoint_from": "config", "sample_ratio": 0.25}},
		{"traces variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318"},
			map[string]any{"enabled": true, "endpoint": "http://127.0.0.1:4318/custom", "endpoint_from": "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "sample_ratio": 1.0}},
		{"base variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"},
			map[string]any{"enabled": true, "endpoint": "http://127.0.0.1:4318/v1/traces", "endpoint_from": "OTEL_EXPORTER_OTLP_ENDPOINT"}},
		{"a section without an endpoint", &Config{}, nil,
			map[string]any{"enabled": true, "endpoint": "http://localhost:4318/v1/traces", "endpoint_from": "default"}},
		{"a password in the URL", &Config{Endpoint: "https://user:secret@collector.example/v1/traces"}, nil,
			map[string]any{"enabled": true, "endpoint": "https://user:xxxxx@collector.example/v1/traces"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Setup(ctx, tt.cfg, "verdictd", env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(ctx)
			got := map[string]any{}
			for _, a := range tr.Attrs() {
				got[a.Key] = a.Value.Any()
			}
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("%s = %#v, want %#v (all: %v)", k, got[k], want, got)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bad, big := -0.1, 1.5
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"scheme":    {Config{Endpoint: "ftp://x/v1/traces"}, "tracing.endpoint"},
		"no host":   {Config{Endpoint: "http:///v1/traces"}, "tracing.endpoint"},
		"negative":  {Config{SampleRatio: &bad}, "tracing.sample_ratio"},
		"above one": {Config{SampleRatio: &big}, "tracing.sample_ratio"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := tc.cfg.Validate("tracing")
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v, want one naming %s", errs, tc.want)
			}
		})
	}
}

// Off, the trace context still passes from headers to _meta and back: the ids stay, and a
// host's malformed members are ignored rather than trusted.
func TestContextPassesThroughWhenOff(t *testing.T) {
	tr := off("not configured")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{}
	h.Set("traceparent", tp)
	ctx := ExtractHeader(context.Background(), h)
	if got := TraceID(ctx); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("TraceID = %q", got)
	}
	meta := InjectMeta(ctx, nil)
	if meta[MetaTraceparent] != tp {
		t.Fatalf("_meta = %v", meta)
	}
	back := ExtractMeta(context.Background(), meta)
	if TraceID(back) != TraceID(ctx) {
		t.Fatalf("round trip lost the trace")
	}
	for _, m := range []map[string]any{nil, {MetaTraceparent: 42}, {MetaTraceparent: "garbage"}} {
		if TraceID(ExtractMeta(context.Background(), m)) != "" {
			t.Errorf("_meta %v gave a trace", m)
		}
	}
	if got := InjectMeta(context.Background(), nil); got != nil {
		t.Errorf("no context injected %v", got)
	}
	if a := tr.Principal("u_01"); a != nil {
		t.Errorf("principal recorded without principals: true: %v", a)
	}
}

// StartServer continues a trusted caller's trace and never an untrusted one's; off, the
// untrusted caller's request has no trace at all.
func TestStartServerOff(t *testing.T) {
	const chosen = "4bf92f3577b34da6a3ce929d0e0e4736"
	h := http.Header{}
	h.Set("traceparent", "00-"+chosen+"-00f067aa0ba902b7-01")
	for _, tc := range []struct {
		trusted bool
		want    string
	}{{true, chosen}, {false, ""}} {
		ctx, span := off("not configured").StartServer(context.Background(), h, tc.trusted, "preflight")
		span.End()
		if got := TraceID(ctx); got != tc.want {
			t.Errorf("trusted %v: trace id %q, want %q", tc.trusted, got, tc.want)
		}
	}
}
