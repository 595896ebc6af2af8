package mcpgate

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/policy"
)

// metrics are the gateway's Prometheus series. No label takes a
// principal, an argument value or a nonce.
type metrics struct {
	reg         *prometheus.Registry
	observeMode prometheus.Gauge
	wouldBlock  *prometheus.CounterVec
	calls       *prometheus.CounterVec
	// callDur is the time a tools/call took to answer, by class: for a gated call of an older
	// host, asked in place, it includes the user's time.
	callDur *prometheus.HistogramVec
	// plainCalls counts the pass-through calls answered without the MCP library's server.
	plainCalls   prometheus.Counter
	preflights   *prometheus.CounterVec
	stateRefused *prometheus.CounterVec
	// storeRefused counts gated calls refused a place among the waiting continuations.
	storeRefused *prometheus.CounterVec
	policyInfo   *prometheus.GaugeVec
	reloads      *prometheus.CounterVec
	authRefused  *prometheus.CounterVec
	// sessionsRefused counts initializes over HTTP refused a session.
	sessionsRefused *prometheus.CounterVec
	// withheld is how many listed tools the policy's pins hold back, by server.
	withheld *prometheus.GaugeVec
}

func newMetrics(pending, pendingBytes, sessions func() float64) *metrics {
	m := &metrics{
		observeMode: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgate_observe_mode",
			Help: "1 while the gateway runs in observe mode: calls are forwarded without a verdict.",
		}),
		wouldBlock: metricx.CounterVec("mcpgate_would_block_total",
			"Observe mode: forwarded irreversible calls the gate would not have let through, by preflight outcome.", "outcome"),
		calls: metricx.CounterVec("mcpgate_calls_total", "tools/call requests finished, by tool class and result.", "class", "result"),
		callDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_call_duration_seconds",
			Help:    "Time from a tools/call request to its answer, by tool class (a question asked in place includes the user's time).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}, []string{"class"}),
		plainCalls: metricx.Counter("mcpgate_plain_calls_total",
			"Pass-through tools/call requests of 2026-07-28 hosts the gateway answered itself, without the MCP library's server (also counted in mcpgate_calls_total)."),
		preflights:   metricx.CounterVec("mcpgate_preflights_total", "Preflights run, by outcome.", "outcome"),
		stateRefused: metricx.CounterVec("mcpgate_request_state_refused_total", "requestState tokens refused, by reason.", "reason"),
		storeRefused: metricx.CounterVec("mcpgate_state_refused_total",
			"Gated calls refused for the bounds of the waiting continuations or their store, by reason.", "reason"),
		policyInfo: metricx.GaugeVec("mcpgate_policy_info", "The policy version in force (value 1).", "version"),
		reloads:    metricx.CounterVec("mcpgate_policy_reloads_total", "Policy reloads, by result (ok or error; an error keeps the old policy).", "result"),
		authRefused: metricx.CounterVec("mcpgate_auth_refusals_total",
			"With an identity section: HTTP requests refused for their access token, and calls refused for a scope their tool requires (insufficient_scope), by reason.", "reason"),
		sessionsRefused: metricx.CounterVec("mcpgate_sessions_refused_total",
			"HTTP initializes of clients before revision 2026-07-28 refused a session, by reason.", "reason"),
		withheld: metricx.GaugeVec("mcpgate_tools_withheld",
			"Tools a server lists that the policy's pins hold back (changed since pinned, or unpinned on a server pinned whole), by server.", "server"),
	}
	m.reg = metricx.Registry("mcpgate", "mcpgate", m.observeMode, m.wouldBlock, m.calls, m.callDur, m.plainCalls, m.preflights, m.stateRefused, m.storeRefused, m.policyInfo, m.reloads, m.authRefused,
		m.sessionsRefused, m.withheld,
		metricx.GaugeFunc("mcpgate_pending_requests",
			"Input-required results whose requestState has not been used or expired yet (with etcd: the deployment's count as this replica last read it).", pending),
		metricx.GaugeFunc("mcpgate_pending_bytes", "Encoded bytes of the waiting continuations (memory store; 0 with etcd, whose quota bounds them).", pendingBytes),
		metricx.GaugeFunc("mcpgate_sessions", "HTTP sessions open for clients before revision 2026-07-28 (bounded by max_sessions).", sessions))
	m.zero()
	return m
}

// zero makes every series whose labels are known in advance exist from the start, at zero: a
// series that appears only on its first event shows as "no data" until then, and a rate() over
// it (an alert on failed reloads, say) sees no increase from nothing to one.
func (m *metrics) zero() {
	outcomes := api.Outcomes()
	// Observe mode counts every outcome but a verdict, and the calls it could not preflight.
	notIssued := slices.DeleteFunc(slices.Clone(outcomes), func(o string) bool { return o == api.OutcomeVerdictIssued })
	states := []string{ErrStateInvalid.Error(), ErrStateExpired.Error(), ErrStateMismatch.Error(), ErrStateReplayed.Error(),
		api.ReasonStateMissing}
	metricx.Zero(m.preflights, outcomes...)
	metricx.Zero(m.wouldBlock, append(notIssued, outcomeInvalidRequest, outcomePreflightError)...)
	metricx.Zero(m.stateRefused, states...)
	metricx.Zero(m.storeRefused, storeReasons()...)
	metricx.Zero(m.reloads, "ok", "error")
	metricx.Zero(m.authRefused, authReasons()...)
	metricx.Zero(m.sessionsRefused, api.ReasonSessionLimit)
	// A forwarded call (read or reversible, or irreversible in observe mode) ends as the tool
	// answered or as the upstream failed. A gated call also ends with a question, or with a
	// refusal for one of the gateway's reasons, a refused answer, or the preflight's outcome.
	forwarded := []string{"ok", "error", api.ReasonUpstreamFailed, api.ReasonUpstreamInputRequired}
	gated := slices.Concat(forwarded, states, storeReasons(), []string{"input_required",
		api.ReasonArgumentsInvalid, api.ReasonMetaInvalid, api.ReasonDeclined, api.ReasonNotAskable, api.ReasonDraftTooLong, api.ReasonElicitation, api.ReasonTooManyRounds,
		api.ReasonPreflightFailed, api.CodeConversationLimit, api.ReasonBusy, api.ReasonExecutionRefused, api.ReasonExecutionFailed, api.ReasonExecutionUnknown, api.ReasonExecutionNotSent,
		api.OutcomeSystemLookup, api.OutcomeDefinitionRepair, api.OutcomeHold, api.OutcomeExhausted, api.OutcomeDeferred, api.OutcomeNotGated,
		api.CodeApprovalDenied, api.CodeApprovalExpired, api.CodeApprovalLapsed, api.ReasonApprovalPendingElsewhere, api.ReasonApprovalTimeout, api.CodeApprovalLimit})
	for class, results := range map[policy.Class][]string{policy.Read: forwarded, policy.Reversible: forwarded, policy.Irreversible: gated} {
		m.callDur.WithLabelValues(string(class))
		for _, r := range results {
			m.calls.WithLabelValues(string(class), r)
		}
	}
}
