package mcpgate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus series. No label takes a
// principal, an argument value or a nonce.
type metrics struct {
	reg          *prometheus.Registry
	observeMode  prometheus.Gauge
	wouldBlock   *prometheus.CounterVec
	calls        *prometheus.CounterVec
	preflights   *prometheus.CounterVec
	stateRefused *prometheus.CounterVec
	policyInfo   *prometheus.GaugeVec
	reloads      *prometheus.CounterVec
}

func newMetrics(pending func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		observeMode: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgate_observe_mode",
			Help: "1 while the gateway runs in observe mode: calls are forwarded without a verdict.",
		}),
		wouldBlock: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_would_block_total",
			Help: "Observe mode: forwarded irreversible calls the gate would not have let through, by preflight outcome.",
		}, []string{"outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_calls_total",
			Help: "tools/call requests finished, by tool class and result.",
		}, []string{"class", "result"}),
		preflights: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_preflights_total",
			Help: "Preflights run, by outcome.",
		}, []string{"outcome"}),
		stateRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_request_state_refused_total",
			Help: "requestState tokens refused, by reason.",
		}, []string{"reason"}),
		policyInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgate_policy_info",
			Help: "The policy version in force (value 1).",
		}, []string{"version"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_policy_reloads_total",
			Help: "Policy reloads, by result (ok or error; an error keeps the old policy).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.observeMode, m.wouldBlock, m.calls, m.preflights, m.stateRefused, m.policyInfo, m.reloads,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpgate_pending_requests",
			Help: "Input-required results whose requestState has not been used or expired yet.",
		}, pending),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// An alert on failed reloads needs the series before the first one.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	return m
}

// setPolicy makes version the only series of mcpgate_policy_info.
func (m *metrics) setPolicy(version string) {
	m.policyInfo.Reset()
	m.policyInfo.WithLabelValues(version).Set(1)
}
