package verdictd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/metricx"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdict"
)

// metrics are verdictd's Prometheus series (docs/operations.md), on the service's own registry.
// No label takes a principal, an argument value or a nonce.
type metrics struct {
	reg         *prometheus.Registry
	preflights  *prometheus.CounterVec
	duration    prometheus.Histogram
	slots       *prometheus.CounterVec
	routes      *prometheus.CounterVec
	verdicts    prometheus.Counter
	measureDur  *prometheus.HistogramVec
	measureFail prometheus.Counter
	policyInfo  *prometheus.GaugeVec
	reloads     *prometheus.CounterVec
	receipts    *prometheus.CounterVec
	// stateErrors and stateConflicts stay zero with the bbolt state store.
	stateErrors    *prometheus.CounterVec
	stateConflicts prometheus.Counter
	// principals counts preflights refused for their principal.
	principals *prometheus.CounterVec
	// triggers counts at_trigger preflights refused for their deferred record's occurrences.
	triggers *prometheus.CounterVec
	// convRefusals counts preflights refused for their principal's conversation bound;
	// convExpired the conversations the bbolt state forgot for idleness.
	convRefusals *prometheus.CounterVec
	convExpired  prometheus.Counter
	// pinRefusals counts preflights of tools their pins hold back. The approvals' series are
	// package approvals', on the same registry.
	pinRefusals *prometheus.CounterVec

	// The series observe counts into, resolved once per label set: every preflight counts its
	// outcome and each of its slots.
	byOutcome metricx.Cache[string, prometheus.Counter]
	bySlot    metricx.Cache[[2]string, prometheus.Counter] // status, source
	byRoute   metricx.Cache[string, prometheus.Counter]
}

func newMetrics() *metrics {
	m := &metrics{
		preflights: metricx.CounterVec("verdictd_preflight_total",
			"Preflights whose decision record was written, by outcome.", "outcome"),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "verdictd_preflight_duration_seconds",
			Help:    "Time from a decoded preflight request to its stored record.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		slots: metricx.CounterVec("verdictd_slots_total",
			"Slots recorded, by status and source (\"none\" when no source settled them).", "status", "source"),
		routes: metricx.CounterVec("verdictd_routes_total",
			"Unknown slots recorded, by route.", "route"),
		verdicts: metricx.Counter("verdictd_verdicts_issued_total",
			"Verdicts signed and stored with their records."),
		measureDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "verdictd_measurement_duration_seconds",
			Help:    "Duration of measurements, by source (http or mcp).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"source"}),
		measureFail: metricx.Counter("verdictd_measurement_failures_total",
			"Measurements that failed (lookup_failed, routed to definition repair)."),
		policyInfo: metricx.GaugeVec("verdictd_policy_info", "The policy version in force (value 1).", "version"),
		reloads: metricx.CounterVec("verdictd_policy_reloads_total",
			"Policy reloads, by result (ok or error; an error keeps the old policy).", "result"),
		receipts: metricx.CounterVec("verdictd_receipts_total",
			"Execution receipts received, by result (accepted or a refusal code).", "result"),
		stateErrors: metricx.CounterVec("verdictd_state_store_errors_total",
			"Requests refused with state_store_unavailable, by operation (read, commit, deferred, receipt).", "op"),
		stateConflicts: metricx.Counter("verdictd_state_store_conflicts_total",
			"Preflights decided again because another replica changed their conversation first."),
		principals: metricx.CounterVec("verdictd_principal_refusals_total",
			"Preflights refused for their principal, by reason: principal_not_allowed, or the reason a subject token was refused for.", "reason"),
		triggers: metricx.CounterVec("verdictd_trigger_refusals_total",
			"at_trigger preflights refused for their deferred record's occurrences, by reason (deferred_consumed, recurrence_exhausted, recurrence_too_soon, recurrence_not_configured).", "reason"),
		convRefusals: metricx.CounterVec("verdictd_conversation_refusals_total",
			"Preflights refused because they would start a conversation beyond the principal's bound, by reason (conversation_limit).", "reason"),
		convExpired: metricx.Counter("verdictd_conversations_expired_total",
			"Conversations forgotten after conversation_ttl without a change (bbolt state store; etcd expires them by lease)."),
		pinRefusals: metricx.CounterVec("verdictd_pin_refusals_total",
			"Preflights ended in definition_repair because the tool's listed definition does not match its pin, by server.", "server"),
	}
	m.reg = metricx.Registry("verdictd", "verdictd", m.stateErrors, m.stateConflicts, m.preflights, m.duration, m.slots, m.routes, m.verdicts, m.measureDur,
		m.measureFail, m.policyInfo, m.reloads, m.receipts, m.principals, m.triggers, m.pinRefusals,
		m.convRefusals, m.convExpired)
	m.zero()
	return m
}

// zero makes every series whose labels are known in advance exist from the start, at zero: a
// series that appears only on its first event shows as "no data" until then, and a rate() over
// it sees no increase from nothing to one. Series of labels met later (a policy version, a
// status and source pair no record has held before) still appear on first use.
func (m *metrics) zero() {
	for _, o := range []string{api.OutcomeVerdictIssued, api.OutcomeAskUser, api.OutcomeSystemLookup, api.OutcomeDefinitionRepair,
		api.OutcomeHold, api.OutcomeExhausted, api.OutcomeDeferred, api.OutcomeNotGated, api.OutcomeRefuse} {
		m.byOutcome.Get(o, func(o string) prometheus.Counter { return m.preflights.WithLabelValues(o) })
	}
	metricx.Zero(m.triggers, triggerRefusals[:]...)
	metricx.Zero(m.convRefusals, api.CodeConversationLimit)
	for _, r := range []string{api.RouteAskUser, api.RouteSystemLookup, api.RouteDefinitionRepair} {
		m.byRoute.Get(r, func(r string) prometheus.Counter { return m.routes.WithLabelValues(r) })
	}
	// The status and source pairs a record holds: a known value comes from one of the cascade's
	// sources, for a condition from evaluation, for a drafted field from its review; a null one
	// only from a measurement that found nothing; an unknown one from none.
	pairs := [][2]string{{api.StatusNull, string(api.SourceMeasuredData)}, {api.StatusUnknown, "none"}}
	for _, src := range append(policy.Cascade(), api.SourceEvaluation, api.SourceReviewedDraft, api.SourceConsoleApproval) {
		pairs = append(pairs, [2]string{api.StatusKnown, string(src)})
	}
	for _, p := range pairs {
		m.bySlot.Get(p, func(l [2]string) prometheus.Counter { return m.slots.WithLabelValues(l[0], l[1]) })
	}
	// A receipt is accepted (applied, or changing nothing: posted again, or older than the
	// baseline), refused by its verification (the reasons a receipt can fail on) or its age, or
	// refused against its verdict's record.
	metricx.Zero(m.receipts, "accepted", "already_applied", "superseded",
		string(verdict.Malformed), string(verdict.AlgNotAllowed), string(verdict.TypMismatch), string(verdict.UnknownKID),
		string(verdict.BadSignature), string(verdict.IssuerNotTrusted), string(verdict.NotYetValid), api.CodeReceiptTooOld,
		api.CodeUnknownVerdict, api.CodeArgumentsMismatch, api.CodeActionKeyMismatch, api.CodeNotInAudience)
	metricx.Zero(m.stateErrors, "read", "commit", "deferred", "receipt")
	metricx.Zero(m.reloads, "ok", "error")
	metricx.Zero(m.measureDur, "http", "mcp")
	metricx.Zero(m.principals, api.CodePrincipalNotAllowed)
	for _, r := range identity.Reasons() {
		if r != identity.TokenMissing { // an empty header is a malformed token: a missing one is no subject token
			metricx.Zero(m.principals, string(r))
		}
	}
}

// observe counts one stored record.
func (m *metrics) observe(rec *api.Record) {
	m.byOutcome.Get(rec.Outcome, func(o string) prometheus.Counter { return m.preflights.WithLabelValues(o) }).Inc()
	for i := range rec.Slots {
		s := &rec.Slots[i]
		src := "none"
		if s.Source != nil {
			src = string(*s.Source)
		}
		m.bySlot.Get([2]string{s.Status, src}, func(l [2]string) prometheus.Counter { return m.slots.WithLabelValues(l[0], l[1]) }).Inc()
		if s.Status == api.StatusUnknown && s.Route != nil {
			m.route(*s.Route)
		}
	}
	for i := range rec.UserChecklist {
		c := &rec.UserChecklist[i]
		if c.Status == api.StatusUnknown && c.Route != nil {
			m.route(*c.Route)
		}
	}
}

func (m *metrics) route(r string) {
	m.byRoute.Get(r, func(r string) prometheus.Counter { return m.routes.WithLabelValues(r) }).Inc()
}
