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

// The cached series count into the vectors' own series, one per label set, created on first
// use only.
func TestMetricsSeries(t *testing.T) {
	m := newMetrics(func(context.Context) (int, error) { return 0, nil })
	if got := seriesOf(t, m, "executor_verdicts_total"); len(got) != 0 {
		t.Fatalf("series before any use: %v", got)
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
	for _, tc := range []struct {
		family string
		want   map[string]float64
	}{
		{"executor_verdicts_total", map[string]float64{
			"reason=,result=accepted": 80, "reason=expired,result=rejected": 80, "reason=replayed,result=rejected": 1}},
		{"executor_executions_total", map[string]float64{"decision=executed": 1 * 80}},
		{"executor_tool_call_duration_seconds", map[string]float64{
			"decision=executed,server=bank,tool=transfer": 80, "decision=failed,server=bank,tool=refund": 80}},
	} {
		got := seriesOf(t, m, tc.family)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.family, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s{%s} = %v, want %v", tc.family, k, got[k], v)
			}
		}
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
