package verdictd

import (
	"bufio"
	"bytes"
	"github.com/verdictgate/verdict/api"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestMetricsExistFromStart: right after start, before any request, /metrics holds every series
// whose labels are known in advance, at zero, so that a dashboard shows zero rather than no data
// and a rate() sees the first event; and the build's info, at one.
func TestMetricsExistFromStart(t *testing.T) {
	e := newEnv(t, envOpts{})
	got := scrape(t, e.srv.URL+"/metrics")
	for _, series := range []string{
		`verdictd_preflight_total{outcome="verdict_issued"}`,
		`verdictd_preflight_total{outcome="ask_user"}`,
		`verdictd_preflight_total{outcome="system_lookup"}`,
		`verdictd_preflight_total{outcome="definition_repair"}`,
		`verdictd_preflight_total{outcome="hold"}`,
		`verdictd_preflight_total{outcome="exhausted"}`,
		`verdictd_preflight_total{outcome="deferred"}`,
		`verdictd_preflight_total{outcome="not_gated"}`,
		`verdictd_routes_total{route="ask_user"}`,
		`verdictd_routes_total{route="system_lookup"}`,
		`verdictd_routes_total{route="definition_repair"}`,
		`verdictd_slots_total{source="user_answer",status="known"}`,
		`verdictd_slots_total{source="instruction",status="known"}`,
		`verdictd_slots_total{source="pre_set_data",status="known"}`,
		`verdictd_slots_total{source="measured_data",status="known"}`,
		`verdictd_slots_total{source="prior_state",status="known"}`,
		`verdictd_slots_total{source="evaluation",status="known"}`,
		`verdictd_slots_total{source="reviewed_draft",status="known"}`,
		`verdictd_slots_total{source="measured_data",status="null"}`,
		`verdictd_slots_total{source="none",status="unknown"}`,
		`verdictd_receipts_total{result="accepted"}`,
		`verdictd_receipts_total{result="bad_signature"}`,
		`verdictd_receipts_total{result="unknown_verdict"}`,
		`verdictd_receipts_total{result="executor_not_in_audience"}`,
		`verdictd_state_store_errors_total{op="commit"}`,
		`verdictd_policy_reloads_total{result="error"}`,
		`verdictd_verdicts_issued_total`,
		`verdictd_measurement_failures_total`,
		`verdictd_measurement_duration_seconds_count{source="http"}`,
		`verdictd_measurement_duration_seconds_count{source="mcp"}`,
		`verdictd_approvals_total{decision="approved"}`,
		`verdictd_approvals_total{decision="denied"}`,
		`verdictd_approvals_total{decision="expired"}`,
		`verdictd_approvals_pending`,
	} {
		if v, ok := got[series]; !ok || v != 0 {
			t.Errorf("%s: %v (present: %v), want 0", series, v, ok)
		}
	}
	if n := len(family(got, "verdictd_preflight_total")); n != len(api.Outcomes()) {
		t.Errorf("%d outcome series, want the %d outcomes", n, len(api.Outcomes()))
	}
	info := family(got, "verdictd_build_info")
	if len(info) != 1 {
		t.Fatalf("build info series: %v", info)
	}
	for series, v := range info {
		for _, label := range []string{`version="`, `revision="`, `go_version="go`} {
			if !strings.Contains(series, label) || v != 1 {
				t.Errorf("%s %v: want %s… and 1", series, v, label)
			}
		}
	}
}

// scrape reads a text-format /metrics page into its samples, by name and labels as written.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	status, body := do(t, http.MethodGet, url, "", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d", url, status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// family returns the samples of one metric family.
func family(samples map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for s, v := range samples {
		if s == name || strings.HasPrefix(s, name+"{") {
			out[s] = v
		}
	}
	return out
}
