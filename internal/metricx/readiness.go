package metricx

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ReadinessState is what a readiness collector reads at a scrape: whether the daemon takes
// requests, and, by server id, whether its tool catalog serves a listing of that server now.
type ReadinessState struct {
	Ready  bool
	Listed map[string]bool
}

// Readiness returns a collector of a daemon's readiness, read with read at each scrape, so that
// an alert sees what /readyz answers without a probe of its own: <daemon>_ready (described by
// readyHelp), 1 while the daemon takes requests and 0 while not, and
// <daemon>_upstream_listed{server}, 1 while its catalog serves a listing of the server and 0
// once it does not (never listed, or past the grace a failing server's last listing is served
// for). read must be cheap and must not block on I/O: anyone who reaches /metrics can scrape
// at will.
func Readiness(daemon, readyHelp string, read func() ReadinessState) prometheus.Collector {
	return &readiness{
		read:  read,
		ready: prometheus.NewDesc(daemon+"_ready", readyHelp, nil, nil),
		listed: prometheus.NewDesc(daemon+"_upstream_listed",
			"1 while the tool catalog serves a listing of the server, 0 while it cannot (never listed, or not within three refresh intervals), by server.",
			[]string{"server"}, nil),
	}
}

type readiness struct {
	read          func() ReadinessState
	ready, listed *prometheus.Desc
}

func (r *readiness) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.ready
	ch <- r.listed
}

func (r *readiness) Collect(ch chan<- prometheus.Metric) {
	st := r.read()
	ch <- prometheus.MustNewConstMetric(r.ready, prometheus.GaugeValue, gauge(st.Ready))
	for server, listed := range st.Listed {
		ch <- prometheus.MustNewConstMetric(r.listed, prometheus.GaugeValue, gauge(listed), server)
	}
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
