package executor

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the executor's Prometheus series (CONTRACT §8). No label takes a principal, an
// argument value or a nonce.
type metrics struct {
	reg        *prometheus.Registry
	verdicts   *prometheus.CounterVec
	callDur    *prometheus.HistogramVec
	executions *prometheus.CounterVec
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
