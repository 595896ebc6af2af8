package executor

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/verdictgate/verdict/internal/metricx"
)

// metrics are the executor's Prometheus series (CONTRACT §8). No label takes a principal, an
// argument value or a nonce.
type metrics struct {
	reg        *prometheus.Registry
	verdicts   *prometheus.CounterVec
	callDur    *prometheus.HistogramVec
	executions *prometheus.CounterVec

	// The series a request touches, resolved once per label set.
	verdictSeries   metricx.Cache[verdictLabels, prometheus.Counter]
	callSeries      metricx.Cache[callLabels, prometheus.Observer]
	executionSeries metricx.Cache[string, prometheus.Counter]
}

type verdictLabels struct{ result, reason string }

type callLabels struct{ server, tool, decision string }

// verdict counts a verdict presented: result "accepted" or "rejected", with the refusal reason.
func (m *metrics) verdict(result, reason string) {
	m.verdictSeries.Get(verdictLabels{result, reason}, func(l verdictLabels) prometheus.Counter {
		return m.verdicts.WithLabelValues(l.result, l.reason)
	}).Inc()
}

// call observes the duration of one upstream tool call.
func (m *metrics) call(server, tool, decision string, seconds float64) {
	m.callSeries.Get(callLabels{server, tool, decision}, func(l callLabels) prometheus.Observer {
		return m.callDur.WithLabelValues(l.server, l.tool, l.decision)
	}).Observe(seconds)
}

// execution counts an execution record finished with decision.
func (m *metrics) execution(decision string) {
	m.executionSeries.Get(decision, func(d string) prometheus.Counter {
		return m.executions.WithLabelValues(d)
	}).Inc()
}

func newMetrics(nonceLen func(context.Context) (int, error)) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "executor_verdicts_total",
			Help: "Verdicts presented, by result (accepted or rejected) and refusal reason.",
		}, []string{"result", "reason"}),
		callDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "executor_tool_call_duration_seconds",
			Help:    "Duration of upstream tool calls, by server, tool and execution decision.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"server", "tool", "decision"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "executor_executions_total",
			Help: "Execution records finished, by execution decision.",
		}, []string{"decision"}),
	}
	nonces := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "executor_nonce_entries",
		Help: "Consumed verdict ids the nonce store still holds.",
	}, func() float64 {
		n, err := nonceLen(context.Background())
		if err != nil {
			return -1
		}
		return float64(n)
	})
	m.reg.MustRegister(m.verdicts, m.callDur, m.executions, nonces,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
