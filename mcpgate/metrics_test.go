package mcpgate

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsExistFromStart: before any call, the gateway's /metrics holds every series whose
// labels are known in advance, at zero, so that a dashboard shows zero rather than no data and
// a rate() sees the first event; and the build's info, at one.
func TestMetricsExistFromStart(t *testing.T) {
	zero := func() float64 { return 0 }
	m := newMetrics(zero, zero, zero)
	// Handler serves the registry this way on /metrics.
	srv := httptest.NewServer(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for l := range strings.Lines(string(body)) {
		lines[strings.TrimSuffix(l, "\n")] = true
	}
	for _, sample := range []string{
		`mcpgate_preflights_total{outcome="verdict_issued"} 0`,
		`mcpgate_preflights_total{outcome="ask_user"} 0`,
		`mcpgate_preflights_total{outcome="hold"} 0`,
		`mcpgate_would_block_total{outcome="ask_user"} 0`,
		`mcpgate_would_block_total{outcome="preflight_error"} 0`,
		`mcpgate_would_block_total{outcome="invalid_request"} 0`,
		`mcpgate_request_state_refused_total{reason="request_state_replayed"} 0`,
		`mcpgate_request_state_refused_total{reason="request_state_missing"} 0`,
		`mcpgate_calls_total{class="read",result="ok"} 0`,
		`mcpgate_calls_total{class="reversible",result="upstream_failed"} 0`,
		`mcpgate_calls_total{class="irreversible",result="ok"} 0`,
		`mcpgate_calls_total{class="irreversible",result="input_required"} 0`,
		`mcpgate_calls_total{class="irreversible",result="hold"} 0`,
		`mcpgate_calls_total{class="irreversible",result="execution_outcome_unknown"} 0`,
		`mcpgate_policy_reloads_total{result="error"} 0`,
		`mcpgate_observe_mode 0`,
		`mcpgate_sessions 0`,
		`mcpgate_pending_requests 0`,
		`mcpgate_pending_bytes 0`,
		`mcpgate_state_refused_total{reason="busy"} 0`,
		`mcpgate_state_refused_total{reason="busy_principal"} 0`,
		`mcpgate_state_refused_total{reason="state_too_large"} 0`,
		`mcpgate_state_refused_total{reason="state_unavailable"} 0`,
		`mcpgate_state_refused_total{reason="rate_limited"} 0`,
		`mcpgate_calls_total{class="irreversible",result="rate_limited"} 0`,
		`mcpgate_calls_total{class="irreversible",result="busy_principal"} 0`,
		`mcpgate_sessions_refused_total{reason="session_limit"} 0`,
		`mcpgate_call_duration_seconds_count{class="read"} 0`,
		`mcpgate_call_duration_seconds_count{class="irreversible"} 0`,
	} {
		if !lines[sample] {
			t.Errorf("no %s", sample)
		}
	}
	if strings.Contains(string(body), `mcpgate_would_block_total{outcome="verdict_issued"}`) {
		t.Error("a verdict is counted as a call observe mode would block")
	}
	info := 0
	for l := range lines {
		if strings.HasPrefix(l, `mcpgate_build_info{go_version="go`) && strings.Contains(l, `,revision="`) &&
			strings.Contains(l, `,version="`) && strings.HasSuffix(l, "} 1") {
			info++
		}
	}
	if info != 1 {
		t.Errorf("%d build info series, want 1:\n%s", info, body)
	}
}

// TestDashboardNamesExportedSeries checks that every gateway series the example Grafana
// dashboard queries is one the gateway exports, and that the dashboard has its requests,
// latency and errors.
func TestDashboardNamesExportedSeries(t *testing.T) {
	zero := func() float64 { return 0 }
	m := newMetrics(zero, zero, zero)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+s] = true
			}
		}
	}
	dash, err := os.ReadFile(filepath.Join("..", "examples", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queried := map[string]bool{}
	for _, name := range regexp.MustCompile(`\bmcpgate_[a-z_]+`).FindAllString(string(dash), -1) {
		queried[name] = true
		if !exported[name] {
			t.Errorf("the dashboard queries %s, which the gateway does not export", name)
		}
	}
	for _, want := range []string{"mcpgate_calls_total", "mcpgate_call_duration_seconds_bucket"} {
		if !queried[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}
