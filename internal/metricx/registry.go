package metricx

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/verdictgate/verdict/internal/buildinfo"
)

// Registry returns a daemon's own registry holding cs and the series every daemon exports
// besides: its build (<name>_build_info, "The build of <who> running") and the Go runtime's and
// the process's series.
func Registry(name, who string, cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	reg.MustRegister(buildinfo.Read().Collector(name+"_build_info", "The build of "+who+" running (value 1)."),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// CounterVec returns a counter vector named name, described by help, over labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Counter returns a counter named name, described by help.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// GaugeVec returns a gauge vector named name, described by help, over labels.
func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// SetInfo makes value the only series of v, an info metric's (the policy version in force, say),
// at 1.
func SetInfo(v *prometheus.GaugeVec, value string) {
	v.Reset()
	v.WithLabelValues(value).Set(1)
}

// GaugeFunc returns a gauge named name, described by help, whose value read gives at each
// scrape.
func GaugeFunc[N int | float64](name, help string, read func() N) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(read()) })
}

// Zero makes the series of each of values, of a vector over one label (of counters, or of
// histograms), exist from the start at zero: a series that appears only on its first event
// shows as "no data" until then, and a rate() over it sees no increase from nothing to one.
func Zero[M any](v interface{ WithLabelValues(...string) M }, values ...string) {
	for _, s := range values {
		v.WithLabelValues(s)
	}
}
