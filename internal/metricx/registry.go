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
