package metricx

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegistryHoldsTheSharedSeries(t *testing.T) {
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "d_things_total", Help: "Things."})
	mfs, err := Registry("d", "the daemon", own).Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetHelp()
	}
	// The daemon's own series, its build, the Go runtime's and the process's.
	for name, want := range map[string]string{
		"d_things_total":             "Things.",
		"d_build_info":               "The build of the daemon running (value 1).",
		"go_goroutines":              "",
		"process_start_time_seconds": "",
	} {
		if got, ok := help[name]; !ok || (want != "" && got != want) {
			t.Errorf("%s: help %q (held: %v), want %q", name, got, ok, want)
		}
	}
}
