package executor

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/verdict"
)

// metrics are the executor's Prometheus series (docs/operations.md). No label takes a principal, an
// argument value or a nonce.
type metrics struct {
	reg        *prometheus.Registry
	verdicts   *prometheus.CounterVec
	callDur    *prometheus.HistogramVec
	executions *prometheus.CounterVec
	unstarted  *prometheus.CounterVec
	// The connect pages' (registered by userGauges, with an executor that has user servers).
	grantsConnected *prometheus.CounterVec
	connectProblems *prometheus.CounterVec
	reads           *prometheus.CounterVec

	// The series a request touches, resolved once per label set.
	verdictSeries   metricx.Cache[verdictLabels, prometheus.Counter]
	callSeries      metricx.Cache[callLabels, prometheus.Observer]
	executionSeries metricx.Cache[string, prometheus.Counter]
}

type verdictLabels struct{ result, reason string }

type callLabels struct{ server, tool, decision string }

// verdict counts a verdict presented: result "accepted" or "rejected", with the refusal reason.
func (m *metrics) verdict(result, reason string) {
	m.verdictSeries.Get(verdictLabels{result, reason}, m.resolveVerdict).Inc()
}

func (m *metrics) resolveVerdict(l verdictLabels) prometheus.Counter {
	return m.verdicts.WithLabelValues(l.result, l.reason)
}

// call observes the duration of one upstream tool call.
func (m *metrics) call(server, tool, decision string, seconds float64) {
	m.callSeries.Get(callLabels{server, tool, decision}, func(l callLabels) prometheus.Observer {
		return m.callDur.WithLabelValues(l.server, l.tool, l.decision)
	}).Observe(seconds)
}

// execution counts an execution record finished with decision.
func (m *metrics) execution(decision string) {
	m.executionSeries.Get(decision, m.resolveExecution).Inc()
}

func (m *metrics) resolveExecution(decision string) prometheus.Counter {
	return m.executions.WithLabelValues(decision)
}

// userGauges registers the gauges of the users' credentials: their own connections open, and
// the tokens held in memory.
func (m *metrics) userGauges(conns, tokens func() int) {
	m.reg.MustRegister(
		metricx.GaugeFunc("executor_user_connections",
			"Connections of the users' own accounts to the token_exchange and user_grant servers, open now.", conns),
		metricx.GaugeFunc("executor_user_tokens",
			"Access tokens of the users' accounts for the token_exchange and user_grant servers held in memory.", tokens),
		m.grantsConnected, m.connectProblems, m.reads)
}

// consumedWithoutStart counts a consumed_without_start record written, by how its verdict was
// found: foundAtRestart or foundUnanswered. It is rare, so the series is not cached.
func (m *metrics) consumedWithoutStart(found string) {
	m.unstarted.WithLabelValues(found).Inc()
}

// nonceCountInterval is the longest executor_nonce_entries reuses a shared nonce store's count.
// Prometheus scrapes every 15-60s, so the gauge is at most one scrape behind.
const nonceCountInterval = 15 * time.Second

// cachedCount answers a count from a copy read at most once per interval. /metrics needs no
// token (Prometheus scrapes it), and counting the etcd nonce store reads every nonce key of the
// deployment: counted on each scrape, anyone who reaches /metrics could load etcd until consumes
// time out and the executor refuses every verdict. A failed count is kept for the interval too,
// so a struggling etcd is not asked again by every scrape. The lock is held across the read, so
// concurrent scrapes wait for one read instead of each starting their own.
type cachedCount struct {
	count    func(context.Context) (int, error)
	now      func() time.Time
	interval time.Duration

	mu  sync.Mutex
	at  time.Time // when n and err were read; zero before the first read
	n   int
	err error
}

// Len returns the count read within the last interval, or reads it now. A clock that went
// back counts as stale, so that a step back cannot keep an old count for longer.
func (c *cachedCount) Len(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if age := c.now().Sub(c.at); !c.at.IsZero() && age >= 0 && age < c.interval {
		return c.n, c.err
	}
	c.n, c.err = c.count(ctx)
	c.at = c.now()
	return c.n, c.err
}

// newMetrics registers the series; nonceLen counts the nonce store's entries and pending the
// consumes given up on that the reconciler has still to settle.
func newMetrics(nonceLen func(context.Context) (int, error), pending func() int) *metrics {
	m := &metrics{
		verdicts: metricx.CounterVec("executor_verdicts_total",
			"Verdicts presented, by result (accepted or rejected) and refusal reason.", "result", "reason"),
		callDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "executor_tool_call_duration_seconds",
			Help:    "Duration of upstream tool calls, by server, tool and execution decision.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"server", "tool", "decision"}),
		executions: metricx.CounterVec("executor_executions_total",
			"Execution records finished, by execution decision.", "decision"),
		grantsConnected: metricx.CounterVec("executor_grants_connected_total",
			"Accounts connected at the connect pages (grants stored in the vault), by server.", "server"),
		reads: metricx.CounterVec("executor_reads_total",
			"Pass-through calls of the users' servers (POST /v1/read), by server and result (ok, or the refusal's reason).", "server", "result"),
		connectProblems: metricx.CounterVec("executor_connect_problems_total",
			"Connect page flows that ended without a grant, by problem code.", "code"),
		unstarted: metricx.CounterVec("executor_consumed_without_start_total",
			"Verdicts consumed in the shared nonce store that never started, recorded as consumed_without_start, by how they were found (restart or unanswered).", "found"),
	}
	nonces := metricx.GaugeFunc("executor_nonce_entries", "Consumed verdict ids the nonce store still holds.", func() int {
		n, err := nonceLen(context.Background())
		if err != nil {
			return -1
		}
		return n
	})
	unsettled := metricx.GaugeFunc("executor_nonce_unsettled",
		"Consumes whose answer was lost, or abandoned, that the reconciler has still to settle with the shared nonce store.", pending)
	m.reg = metricx.Registry("executor", "the executor", m.verdicts, m.callDur, m.executions, m.unstarted, nonces, unsettled)
	m.zero()
	return m
}

// zero makes every series whose labels are known in advance exist from the start, at zero: a
// series that appears only on its first event shows as "no data" until then, and a rate() over
// it sees no increase from nothing to one. The tool call durations are labelled by server and
// tool, which the catalog names only once it has listed them, so they appear on first use.
func (m *metrics) zero() {
	m.verdictSeries.Get(verdictLabels{"accepted", ""}, m.resolveVerdict)
	// A presented verdict is refused by one of the verifier's checks, by single use, or by one
	// of the executor's own reasons.
	for _, r := range []string{
		string(verdict.Malformed), string(verdict.AlgNotAllowed), string(verdict.TypMismatch), string(verdict.UnknownKID),
		string(verdict.BadSignature), string(verdict.IssuerNotTrusted), string(verdict.AudienceMismatch), string(verdict.Expired),
		string(verdict.NotYetValid), string(verdict.TTLTooLong), string(verdict.UnknownTool), string(verdict.SchemaChanged),
		string(verdict.ArgumentsMismatch), string(verdict.Replayed), api.ExecutionReasonConsumedNotStarted,
		nonce.ReasonUnavailable, api.ExecutionReasonCatalogUnavailable, api.CodeShuttingDown, api.GateDefinitionUnpinned,
		api.ExecutionReasonCredentialRequired, api.ExecutionReasonCredentialInvalid, api.ExecutionReasonCredentialForeign, api.ExecutionReasonCredentialExchangeFailed,
		api.ExecutionReasonCredentialUnavailable,
	} {
		m.verdictSeries.Get(verdictLabels{"rejected", r}, m.resolveVerdict)
	}
	for _, d := range []api.ExecutionDecision{api.ExecutionExecuted, api.ExecutionFailed, api.ExecutionOutcomeUnknown, api.ExecutionNotExecuted} {
		m.executionSeries.Get(string(d), m.resolveExecution)
	}
	metricx.Zero(m.unstarted, foundAtRestart, foundUnanswered)
}
