package metricx

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The readiness series follow what read says at each scrape, servers coming and going with it.
func TestReadinessCollector(t *testing.T) {
	var st ReadinessState
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Readiness("d", "1 while d takes requests.", func() ReadinessState { return st }))
	for _, tc := range []struct {
		st   ReadinessState
		want map[string]float64
	}{
		{ReadinessState{Ready: true, Listed: map[string]bool{"bank": true, "crm": false}},
			map[string]float64{"d_ready": 1, `d_upstream_listed{server="bank"}`: 1, `d_upstream_listed{server="crm"}`: 0}},
		{ReadinessState{Listed: map[string]bool{"bank": false}},
			map[string]float64{"d_ready": 0, `d_upstream_listed{server="bank"}`: 0}},
		{ReadinessState{Ready: true}, map[string]float64{"d_ready": 1}},
	} {
		st = tc.st
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				name := f.GetName()
				for _, l := range m.GetLabel() {
					name += "{" + l.GetName() + `="` + l.GetValue() + `"}`
				}
				got[name] = m.GetGauge().GetValue()
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("series %v, want %v", got, tc.want)
		}
	}
}
