package executor

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The cached series count into the vectors' own series, one per label set: the series whose
// labels are known in advance exist from the start at zero, the others from their first use.
func TestMetricsSeries(t *testing.T) {
	m := newMetrics(func(context.Context) (int, error) { return 0, nil }, func() int { return 0 })
	zeros := map[string]int{"executor_verdicts_total": 25, "executor_executions_total": 4, "executor_tool_call_duration_seconds": 0,
		"executor_consumed_without_start_total": 2}
	for family, n := range zeros {
		got := seriesOf(t, m, family)
		if len(got) != n {
			t.Errorf("%s before any use: %v, want %d series", family, got, n)
		}
		for k, v := range got {
			if v != 0 {
				t.Errorf("%s{%s} = %v before any use", family, k, v)
			}
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				m.verdict("accepted", "")
				m.verdict("rejected", "expired")
				m.call("bank", "transfer", "executed", 0.001)
				m.call("bank", "refund", "failed", 0.002)
				m.execution("executed")
			}
		})
	}
	wg.Wait()
	m.verdict("rejected", "replayed")
	m.verdict("rejected", "a_reason_of_tomorrow")
	for _, tc := range []struct {
		family string
		series int                // how many in all
		want   map[string]float64 // the others are zero
	}{
		{"executor_verdicts_total", 26, map[string]float64{
			"reason=,result=accepted": 80, "reason=expired,result=rejected": 80, "reason=replayed,result=rejected": 1,
			"reason=a_reason_of_tomorrow,result=rejected": 1}},
		{"executor_executions_total", 4, map[string]float64{"decision=executed": 1 * 80}},
		{"executor_tool_call_duration_seconds", 2, map[string]float64{
			"decision=executed,server=bank,tool=transfer": 80, "decision=failed,server=bank,tool=refund": 80}},
	} {
		got := seriesOf(t, m, tc.family)
		if len(got) != tc.series {
			t.Errorf("%s: %d series %v, want %d", tc.family, len(got), got, tc.series)
		}
		for k, v := range got {
			if v != tc.want[k] {
				t.Errorf("%s{%s} = %v, want %v", tc.family, k, v, tc.want[k])
			}
		}
	}
}

// TestMetricsExistFromStart: right after start, before any request, /metrics holds the verdict
// and execution series at zero, so that a dashboard shows zero rather than no data and a rate()
// sees the first event; and the build's info, at one.
func TestMetricsExistFromStart(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, series := range []string{
		`executor_verdicts_total{reason="",result="accepted"}`,
		`executor_verdicts_total{reason="replayed",result="rejected"}`,
		`executor_verdicts_total{reason="arguments_mismatch",result="rejected"}`,
		`executor_verdicts_total{reason="nonce_store_unavailable",result="rejected"}`,
		`executor_verdicts_total{reason="consumed_not_started",result="rejected"}`,
		`executor_consumed_without_start_total{found="restart"}`,
		`executor_consumed_without_start_total{found="unanswered"}`,
		`executor_nonce_unsettled`,
		`executor_verdicts_total{reason="shutting_down",result="rejected"}`,
		`executor_executions_total{decision="executed"}`,
		`executor_executions_total{decision="failed"}`,
		`executor_executions_total{decision="outcome_unknown"}`,
		`executor_executions_total{decision="not_executed"}`,
	} {
		v, err := readSample(e.srv.URL+"/metrics", func(name string) bool { return name == series })
		if err != nil || v != 0 {
			t.Errorf("%s: %v, %v; want 0", series, v, err)
		}
	}
	v, err := readSample(e.srv.URL+"/metrics", func(name string) bool {
		return strings.HasPrefix(name, `executor_build_info{go_version="go`) && strings.Contains(name, `,revision="`) && strings.Contains(name, `,version="`)
	})
	if err != nil || v != 1 {
		t.Errorf("executor_build_info: %v, %v; want 1", v, err)
	}
}

// seriesOf returns the family's series by their labels: counter values, histogram counts.
func seriesOf(t *testing.T, m *metrics, family string) map[string]float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, s := range mf.GetMetric() {
			key := ""
			for i, l := range s.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			if h := s.GetHistogram(); h != nil {
				out[key] = float64(h.GetSampleCount())
			} else {
				out[key] = s.GetCounter().GetValue()
			}
		}
	}
	return out
}

// scrapeNonceEntries reads executor_nonce_entries from the executor's /metrics, as Prometheus
// does, without a token.
func scrapeNonceEntries(t *testing.T, base string) float64 {
	t.Helper()
	v, err := nonceEntries(base)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func nonceEntries(base string) (float64, error) {
	return readSample(base+"/metrics", func(name string) bool { return name == "executor_nonce_entries" })
}

// readSample returns the value of the first sample of a text-format /metrics page whose name
// (with its labels, as written) match accepts.
func readSample(url string, match func(string) bool) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || !match(name) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: sample %q: %w", url, line, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	return 0, fmt.Errorf("%s has no such sample", url)
}

// TestBoltNonceEntriesLive: the bbolt store's count is a field read in one View, so the gauge
// stays live: each scrape shows every verdict consumed before it.
func TestBoltNonceEntriesLive(t *testing.T) {
	e := newEnv(t, envOpts{})
	for want := range 3 {
		if got := scrapeNonceEntries(t, e.srv.URL); got != float64(want) {
			t.Fatalf("executor_nonce_entries %v after %d verdicts", got, want)
		}
		e.executeN(1)
	}
}
