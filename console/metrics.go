package console

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/metricx"
)

// knownCodes are the refusal codes a metric label may carry: verdictd's approvals codes and the
// console's own. Anything else verdictd might send is counted as "other", so that no answer
// can grow the label set.
var knownCodes = []string{
	api.CodeUnauthorized, api.CodeSelfApproval, api.CodeApproverNotInGroup, api.CodeChannelNotAllowed, api.CodeNotFound,
	api.CodeAlreadyDecided, api.CodeApprovalValueMismatch, api.CodeApprovalExpired,
	codeTokenExpired, codeUnavailable, codeBadAnswer, codeBadForm,
}

// metrics are the console's series. No label carries a subject, an approval id or a value.
type metrics struct {
	reg       *prometheus.Registry
	signIns   *prometheus.CounterVec
	decisions *prometheus.CounterVec
	forms     *prometheus.CounterVec
	audits    *prometheus.CounterVec
	// connections counts the connections page's lists; revocations its revocations, by what
	// the authorization server did or why nothing was revoked.
	connections, revocations *prometheus.CounterVec
	// signInStarts counts GET /login: ok, or why no sign-in was started.
	signInStarts *prometheus.CounterVec
}

func newMetrics(sessions, signIns func() int) *metrics {
	m := &metrics{
		signIns: metricx.CounterVec("console_sign_ins_total",
			"Sign-ins finished at the callback, by result (ok, sign_in_failed, sign_in_expired).", "result"),
		decisions: metricx.CounterVec("console_decisions_total",
			"Decisions posted, by decision (approve, deny) and result (decided, or the refusal code).", "decision", "result"),
		forms: metricx.CounterVec("console_form_refusals_total",
			"POSTs refused before reaching verdictd, by code (csrf_token_invalid, origin_mismatch, session_ended, session_store_unavailable, bad_form).", "code"),
		signInStarts: metricx.CounterVec("console_sign_in_starts_total",
			"Sign-ins started at GET /login, by result (ok, sign_in_limit, sign_in_client_limit).", "result"),
		audits: metricx.CounterVec("console_audit_views_total",
			"Audit views built, by result (ok, audit_failed).", "result"),
		connections: metricx.CounterVec("console_connections_views_total",
			"Lists of a user's connected accounts, by result (ok, grant_unreadable, executor_refused, executor_unavailable).", "result"),
		revocations: metricx.CounterVec("console_revocations_total",
			"Revocations of a user's connected account, by result: what the authorization server did (revoked, unsupported, failed, other), or why nothing was revoked (connection_not_found, executor_refused, executor_unavailable).", "result"),
	}
	metricx.Zero(m.signIns, "ok", codeSignInFailed, codeSignInExpired)
	metricx.Zero(m.signInStarts, "ok", codeSignInLimit, codeSignInClientLimit)
	for _, d := range []string{api.DecisionApprove, api.DecisionDeny} {
		for _, c := range append(knownCodes, "decided", "other") {
			m.decisions.WithLabelValues(d, c)
		}
	}
	metricx.Zero(m.forms, codeCSRF, codeOrigin, codeSessionEnded, codeSessionStoreUnavailable, codeBadForm)
	metricx.Zero(m.audits, "ok", codeAuditFailed)
	metricx.Zero(m.connections, connectionsResults...)
	metricx.Zero(m.revocations, revocationResults...)
	m.reg = metricx.Registry("console", "the console", m.signIns, m.signInStarts, m.decisions, m.forms, m.audits, m.connections, m.revocations,
		metricx.GaugeFunc("console_sessions",
			"Sign-in sessions held by the session store (ended ones until they are swept, or their etcd lease ends); with etcd, the count /readyz or a sign-in last read.", sessions),
		metricx.GaugeFunc("console_sign_ins_in_progress",
			"Sign-ins started and not yet back at the callback (expired ones until they are removed).", signIns))
	return m
}

// The results the connections page's metrics count: every code executorProblem makes, and
// the upstream answers of the executor's revocations (any other is counted as other).
var (
	connectionsResults = []string{"ok", api.CodeGrantUnreadable, codeExecutorRefused, codeExecutorUnavailable}
	revocationResults  = []string{api.GrantUpstreamRevoked, api.GrantUpstreamUnsupported, api.GrantUpstreamFailed, "other",
		codeConnectionNotFound, api.CodeGrantUnreadable, codeExecutorRefused, codeExecutorUnavailable}
)

// revoked counts a revocation's result: the upstream answer, or why nothing was revoked.
func (m *metrics) revoked(result string) {
	if !slices.Contains(revocationResults, result) {
		result = "other"
	}
	m.revocations.WithLabelValues(result).Inc()
}

// decided counts a decision's result: "decided", or its refusal code.
func (m *metrics) decided(decision, result string) {
	if result != "decided" && !slices.Contains(knownCodes, result) {
		result = "other"
	}
	m.decisions.WithLabelValues(decision, result).Inc()
}
