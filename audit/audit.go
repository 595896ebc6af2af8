package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/verdict"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// Kind names an anomaly in reports; the values are stable for scripts reading --json output.
type Kind string

// The anomaly kinds, in the order a report lists them for one verdict. The package
// documentation says what each one means.
const (
	ExecutionWithoutVerdict Kind = "execution_without_verdict"
	DecisionNotIssued       Kind = "decision_not_issued"
	ExecutedMoreThanOnce    Kind = "executed_more_than_once"
	ArgumentsDigestMismatch Kind = "arguments_digest_mismatch"
	BindingMismatch         Kind = "binding_mismatch"
	StartedNotFinished      Kind = "started_not_finished"
	VerdictIssuedTwice      Kind = "verdict_issued_twice"
	ConflictingRecords      Kind = "conflicting_records"
	ConsumedUnaccounted     Kind = "consumed_unaccounted"
	DeferredOverused        Kind = "deferred_overused"
)

// Refusal reasons of the executor (docs/api.md) that say a verdict was consumed before the
// refused presentation: by another presentation, which has a record somewhere, or by one that
// was consumed and never started, which its executor records as
// store.ReasonConsumedWithoutStart.
const (
	reasonReplayed           = string(verdict.Replayed)
	reasonConsumedNotStarted = api.ExecutionReasonConsumedNotStarted
)

// An Anomaly is one finding, with the records involved and a sentence for the operator.
type Anomaly struct {
	Kind             Kind     `json:"kind"`
	VerdictID        string   `json:"verdict_id,omitempty"`
	DecisionRecords  []string `json:"decision_records,omitempty"`
	ExecutionRecords []string `json:"execution_records,omitempty"`
	// Fields lists the disagreeing members of a binding_mismatch or conflicting_records.
	Fields  []string `json:"fields,omitempty"`
	Message string   `json:"message"`
}

// Report is the outcome of an audit.
type Report struct {
	Sources    []SourceCount   `json:"sources"`
	Decisions  DecisionCounts  `json:"decisions"`
	Executions ExecutionCounts `json:"executions"`
	Pairs      PairCounts      `json:"pairs"`
	// OutcomeUnknown lists every outcome_unknown attempt: the executor cannot tell whether
	// the call took effect, so an operator reconciles it with the upstream system.
	OutcomeUnknown []OpenExecution `json:"outcome_unknown"`
	// InFlight lists started attempts younger than Options.StartedGrace, which a live
	// executor may still finish; they are not anomalies.
	InFlight []OpenExecution `json:"in_flight"`
	// ConsumedNotStarted lists every consumed_without_start record: a verdict consumed in a
	// shared nonce store whose call never started. Nothing ran, and the verdict can no longer
	// run: the caller needs a fresh preflight. Not an anomaly once recorded.
	ConsumedNotStarted []OpenExecution `json:"consumed_not_started"`
	Anomalies          []Anomaly       `json:"anomalies"`
	// Pairings lists, when Options.Pairings asks for it, every verdict id with attempts and the
	// records the pairing put together, ordered by verdict id.
	Pairings []Pairing `json:"pairings,omitempty"`
	// Clean is true when there is no anomaly.
	Clean bool `json:"clean"`
}

// SourceCount is what one source contributed.
type SourceCount struct {
	Source  string `json:"source"`
	Records string `json:"records"` // "decision" or "execution"
	Read    int    `json:"read"`
	// Duplicates counts records already read from an earlier source (or earlier in this one).
	Duplicates int `json:"duplicates"`
	// Completeness says how the audit knows it read the whole source. A source whose read
	// could not be completed fails the audit, so this is never a partial read: Unverified
	// marks a JSONL file, whose wholeness is the operator's responsibility.
	Completeness Completeness `json:"completeness"`
}

// DecisionCounts count distinct decision records.
type DecisionCounts struct {
	Total     int            `json:"total"`
	ByOutcome map[string]int `json:"by_outcome"`
}

// ExecutionCounts count distinct execution records.
type ExecutionCounts struct {
	Total      int            `json:"total"`
	ByDecision map[string]int `json:"by_decision"`
	// RefusalsByReason counts not_executed records by reason code.
	RefusalsByReason map[string]int `json:"refusals_by_reason"`
}

// PairCounts relate issued verdicts to their attempts.
type PairCounts struct {
	// Paired: issued verdicts with at least one attempt.
	Paired int `json:"paired"`
	// IssuedNotExecuted: issued verdicts without an attempt (unused, expired, refused, not yet
	// presented, or whose call never reached the tool's server: upstream_unavailable) and
	// without a consumed_without_start record; not an anomaly.
	IssuedNotExecuted int `json:"issued_not_executed"`
	// ConsumedNotStarted: issued verdicts without an attempt that an executor recorded as
	// consumed and never started (consumed_without_start); not an anomaly.
	ConsumedNotStarted int `json:"consumed_not_started"`
	// Unpaired: verdict ids with attempts but no issuing decision record (each one is an
	// anomaly).
	Unpaired int `json:"unpaired"`
}

// Pairing is what the audit paired under one verdict id: the decision records that issued it
// (none for an execution without a verdict; the records that did not issue it for
// decision_not_issued) and every attempt under it. Anomalies name the same record ids, so a
// reader puts a pairing and its findings side by side by id.
type Pairing struct {
	VerdictID string `json:"verdict_id"`
	// Issued is true when a decision record with outcome verdict_issued carries the verdict id.
	Issued           bool     `json:"issued"`
	DecisionRecords  []string `json:"decision_records"`
	ExecutionRecords []string `json:"execution_records"`
}

// OpenExecution is an attempt whose outcome the records do not settle.
type OpenExecution struct {
	RecordID   string    `json:"record_id"`
	VerdictID  string    `json:"verdict_id"`
	ExecutorID string    `json:"executor_id"`
	Reason     string    `json:"reason,omitempty"`
	StartedAt  time.Time `json:"started_at"`
}

// Options configure Run. The zero value is usable.
type Options struct {
	// StartedGrace exempts started attempts younger than this from started_not_finished
	// (they are listed in Report.InFlight instead). Zero reports every started record: right
	// for files and exports of stopped executors; auditing a live executor over HTTP, give at
	// least its call_timeout.
	StartedGrace time.Duration
	// Now is the clock StartedGrace is measured with; nil means time.Now.
	Now func() time.Time
	// Pairings fills Report.Pairings, for a reader that shows each pair (the review console's
	// audit view); the command line's report leaves it out.
	Pairings bool
}

// ErrNoSources: Run needs at least one decision source and one execution source.
var ErrNoSources = errors.New("audit: at least one decision source and one execution source are needed")

// Run reads every source and returns the report. A source that cannot be read completely
// fails the whole audit with a *SourceError: a report on part of the records could call an
// anomaly clean. An HTTP source is complete only when the daemon's trailers confirm the end
// of its export (see HTTP); a JSONL file cannot prove it is whole and is reported with
// Completeness Unverified.
func Run(ctx context.Context, decisions, executions []Source, opts Options) (*Report, error) {
	if len(decisions) == 0 || len(executions) == 0 {
		return nil, ErrNoSources
	}
	a := newAuditor()
	// Executions first: they decide which decision records are worth keeping, and against
	// live daemons the order is the race-free one. A verdict is issued before it is executed,
	// so every execution read here names a decision record that the later read of the
	// decision sources finds; the other order could miss a verdict issued and executed
	// between the two reads and report its execution as never issued.
	for _, src := range executions {
		i := a.addSource(src, "execution")
		c, err := readExecutions(ctx, src, func(x *api.ExecutionRecord) error { a.addExecution(i, x); return nil })
		if err != nil {
			return nil, &SourceError{Source: src.String(), Records: "execution", Err: err}
		}
		a.report.Sources[i].Completeness = c
	}
	a.indexAttempts()
	for _, src := range decisions {
		i := a.addSource(src, "decision")
		c, err := readDecisions(ctx, src, func(d *store.Decision) error { return a.addDecision(i, d) })
		if err != nil {
			return nil, &SourceError{Source: src.String(), Records: "decision", Err: err}
		}
		a.report.Sources[i].Completeness = c
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	a.pairings = opts.Pairings
	return a.finish(now(), opts.StartedGrace), nil
}

// execution is what the audit keeps of an execution record.
type execution struct {
	api.ExecutionRecord
	src int
}

func (x *execution) attempt() bool { return x.Decision != api.ExecutionNotExecuted }

// decisionSeen is what the audit keeps of every decision record: enough to count it once and
// to notice two sources disagreeing about it.
type decisionSeen struct {
	outcome   string
	verdictID string
	src       int
}

// decision is what the audit keeps of a decision record an execution refers to: the members
// the pairing compares, and nothing of the values, so that holding many costs little.
type decision struct {
	RecordID        string
	ActionKey       string
	Phase           string
	Principal       string
	Server          string
	Tool            string
	Outcome         string
	VerdictID       string
	ArgumentsDigest string
}

// readDecision reads the members of a stored decision record that the pairing compares.
func readDecision(d *store.Decision) (*decision, error) {
	var rec api.Record
	if err := apijson.Unmarshal(d.Record, &rec); err != nil {
		return nil, fmt.Errorf("decision record %s: %w", d.RecordID, err)
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return &decision{
		RecordID: rec.RecordID, ActionKey: deref(rec.ActionKey), Phase: deref(rec.Phase),
		Principal: rec.Principal, Server: rec.Server, Tool: rec.Tool, Outcome: rec.Outcome,
		VerdictID: deref(rec.VerdictID), ArgumentsDigest: deref(rec.ArgumentsDigest),
	}, nil
}

type auditor struct {
	report   Report
	execs    map[string]*execution   // by record id
	attempts map[string][]*execution // by verdict id, after indexAttempts
	// unstarted are the consumed_without_start records, unsent the not_executed records of
	// calls whose request never reached the server (upstream_unavailable), and consumedBy the
	// refusals that say a verdict was consumed (replayed, consumed_not_started), by verdict
	// id, after indexAttempts.
	unstarted  map[string][]*execution
	unsent     map[string][]*execution
	consumedBy map[string][]*execution
	refs       map[string]bool         // decision record ids named by an attempt's ref_record
	seen       map[string]decisionSeen // every decision record id
	byVerdict  map[string][]*decision  // decision records carrying a verdict id that has attempts
	byRecord   map[string]*decision    // decision records named by a ref_record
	kept       map[string]*decision    // byVerdict and byRecord, by record id
	anomalies  []Anomaly               // found while reading (conflicting records)
	deferreds  deferredUses
	pairings   bool // list every pairing in the report
}

func newAuditor() *auditor {
	return &auditor{
		report: Report{
			Decisions: DecisionCounts{ByOutcome: map[string]int{}},
			Executions: ExecutionCounts{
				ByDecision: map[string]int{}, RefusalsByReason: map[string]int{},
			},
			OutcomeUnknown: []OpenExecution{}, InFlight: []OpenExecution{}, ConsumedNotStarted: []OpenExecution{},
			Anomalies: []Anomaly{},
		},
		execs:     map[string]*execution{},
		refs:      map[string]bool{},
		seen:      map[string]decisionSeen{},
		byVerdict: map[string][]*decision{},
		byRecord:  map[string]*decision{},
		kept:      map[string]*decision{},
	}
}

func (a *auditor) addSource(src Source, records string) int {
	a.report.Sources = append(a.report.Sources, SourceCount{Source: src.String(), Records: records})
	return len(a.report.Sources) - 1
}

func (a *auditor) addExecution(src int, x *api.ExecutionRecord) {
	a.report.Sources[src].Read++
	e := &execution{ExecutionRecord: *x, src: src}
	e.Verdict = "" // the token is not needed, and is the largest member
	prev, ok := a.execs[x.RecordID]
	if !ok {
		a.execs[x.RecordID] = e
		return
	}
	a.report.Sources[src].Duplicates++
	// The same record read twice, possibly at two moments of its life: a started record
	// finishes in place, so a final copy supersedes a started one. Anything else differing
	// means two sources disagree about one record.
	if fields := execDiff(&prev.ExecutionRecord, &e.ExecutionRecord); len(fields) > 0 {
		an := a.conflict("execution", x.RecordID, prev.src, src, fields)
		an.VerdictID, an.ExecutionRecords = x.VerdictID, []string{x.RecordID}
		a.anomalies = append(a.anomalies, an)
		return
	}
	if prev.Decision == api.ExecutionStarted && e.Decision != api.ExecutionStarted {
		a.execs[x.RecordID] = e
	}
}

// conflict is the anomaly of the sources first and then disagreeing on the fields of one
// record, a decision or an execution record.
func (a *auditor) conflict(records, id string, first, then int, fields []string) Anomaly {
	return Anomaly{Kind: ConflictingRecords, Fields: fields,
		Message: fmt.Sprintf("%s record %s differs between %s and %s (%s)",
			records, id, a.report.Sources[first].Source, a.report.Sources[then].Source, strings.Join(fields, ", "))}
}

// execDiff lists the members that differ between two copies of one execution record, leaving
// out what legitimately changes when a started record finishes.
func execDiff(a, b *api.ExecutionRecord) []string {
	var out []string
	add := func(name string, x, y string) {
		if x != y {
			out = append(out, name)
		}
	}
	add("executor_id", a.ExecutorID, b.ExecutorID)
	add("verdict_id", a.VerdictID, b.VerdictID)
	add("action_key", a.ActionKey, b.ActionKey)
	add("ref_phase", a.RefPhase, b.RefPhase)
	add("ref_record", a.RefRecord, b.RefRecord)
	add("principal", a.Principal, b.Principal)
	add("server", a.Server, b.Server)
	add("tool", a.Tool, b.Tool)
	add("arguments_digest", a.ArgumentsDigest, b.ArgumentsDigest)
	if !a.StartedAt.Equal(b.StartedAt) {
		out = append(out, "started_at")
	}
	switch {
	case a.Decision != api.ExecutionStarted && b.Decision != api.ExecutionStarted:
		add("execution_decision", string(a.Decision), string(b.Decision))
		add("reason", a.Reason, b.Reason)
		add("result_digest", a.ResultDigest, b.ResultDigest)
		if !a.FinishedAt.Equal(b.FinishedAt) {
			out = append(out, "finished_at")
		}
	case a.Decision == api.ExecutionNotExecuted && a.Reason == api.ExecutionReasonUpstreamUnavailable,
		b.Decision == api.ExecutionNotExecuted && b.Reason == api.ExecutionReasonUpstreamUnavailable:
		// A started call whose request never reached the server finishes not_executed.
	case a.Decision == api.ExecutionNotExecuted || b.Decision == api.ExecutionNotExecuted:
		// Otherwise a started record finishes as an attempt (executed, failed,
		// outcome_unknown); it never becomes a refusal. Taking either copy would drop an
		// attempt from the pairing or invent one.
		out = append(out, "execution_decision")
	}
	return out
}

// indexAttempts groups the attempts by verdict id once every execution source is read.
func (a *auditor) indexAttempts() {
	a.attempts = map[string][]*execution{}
	a.unstarted, a.unsent, a.consumedBy = map[string][]*execution{}, map[string][]*execution{}, map[string][]*execution{}
	for _, x := range a.execs {
		a.report.Executions.Total++
		a.report.Executions.ByDecision[string(x.Decision)]++
		if !x.attempt() {
			a.report.Executions.RefusalsByReason[cmp.Or(x.Reason, "(none)")]++
			switch {
			case x.VerdictID == "":
			case x.Reason == store.ReasonConsumedWithoutStart:
				a.unstarted[x.VerdictID] = append(a.unstarted[x.VerdictID], x)
			case x.Reason == api.ExecutionReasonUpstreamUnavailable:
				a.unsent[x.VerdictID] = append(a.unsent[x.VerdictID], x)
			case x.Reason == reasonReplayed || x.Reason == reasonConsumedNotStarted:
				a.consumedBy[x.VerdictID] = append(a.consumedBy[x.VerdictID], x)
			}
			continue
		}
		a.attempts[x.VerdictID] = append(a.attempts[x.VerdictID], x)
		if x.RefRecord != "" {
			a.refs[x.RefRecord] = true
		}
	}
	for _, xs := range a.attempts {
		slices.SortFunc(xs, func(p, q *execution) int { return strings.Compare(p.RecordID, q.RecordID) })
	}
}

// internOutcome returns the contract's constant for a known outcome, so that a million
// records share a handful of strings.
func internOutcome(s string) string {
	for _, o := range api.Outcomes() {
		if s == o {
			return o
		}
	}
	return strings.Clone(s)
}

func (a *auditor) addDecision(src int, d *store.Decision) error {
	a.report.Sources[src].Read++
	if prev, ok := a.seen[d.RecordID]; ok {
		a.report.Sources[src].Duplicates++
		var fields []string
		if prev.outcome != d.Outcome {
			fields = append(fields, "outcome")
		}
		if prev.verdictID != d.VerdictID {
			fields = append(fields, "verdict_id")
		}
		if k := a.kept[d.RecordID]; k != nil {
			// An execution is paired with the copy read first; a copy that binds other
			// values would have paired differently, so the disagreement is reported.
			diffs, err := decisionDiff(k, d)
			if err != nil {
				return err
			}
			fields = append(fields, diffs...)
		}
		if len(fields) > 0 {
			an := a.conflict("decision", d.RecordID, prev.src, src, fields)
			an.VerdictID, an.DecisionRecords = cmp.Or(prev.verdictID, d.VerdictID), []string{d.RecordID}
			a.anomalies = append(a.anomalies, an)
		}
		return nil
	}
	seen := decisionSeen{outcome: internOutcome(d.Outcome), verdictID: d.VerdictID, src: src}
	a.seen[d.RecordID] = seen
	if err := a.deferreds.add(d); err != nil {
		return err
	}
	a.report.Decisions.Total++
	a.report.Decisions.ByOutcome[seen.outcome]++

	_, executed := a.attempts[d.VerdictID]
	executed = executed && d.VerdictID != ""
	if d.Outcome == api.OutcomeVerdictIssued && !executed {
		if _, unstarted := a.unstarted[d.VerdictID]; unstarted && d.VerdictID != "" {
			a.report.Pairs.ConsumedNotStarted++
		} else {
			a.report.Pairs.IssuedNotExecuted++
		}
	}
	if !executed && !a.refs[d.RecordID] {
		return nil
	}
	rec, err := readDecision(d)
	if err != nil {
		return err
	}
	// The index metadata is what the store (or the export's own members) says; keep the two
	// consistent with the record's body by trusting the metadata the record was filed under.
	rec.RecordID, rec.Outcome, rec.VerdictID = d.RecordID, d.Outcome, d.VerdictID
	if executed {
		a.byVerdict[d.VerdictID] = append(a.byVerdict[d.VerdictID], rec)
	}
	if a.refs[d.RecordID] {
		a.byRecord[d.RecordID] = rec
	}
	a.kept[d.RecordID] = rec
	return nil
}

// decisionDiff lists the members the pairing reads (masking leaves them alone) that differ
// between a kept decision record and another copy of it.
func decisionDiff(k *decision, d *store.Decision) ([]string, error) {
	rec, err := readDecision(d)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range [][3]string{
		{"action_key", k.ActionKey, rec.ActionKey},
		{"phase", k.Phase, rec.Phase},
		{"principal", k.Principal, rec.Principal},
		{"server", k.Server, rec.Server},
		{"tool", k.Tool, rec.Tool},
		{"arguments_digest", k.ArgumentsDigest, rec.ArgumentsDigest},
	} {
		if f[1] != f[2] {
			out = append(out, f[0])
		}
	}
	return out, nil
}

func (a *auditor) finish(now time.Time, grace time.Duration) *Report {
	r := &a.report
	for _, vid := range slices.Sorted(maps.Keys(a.attempts)) {
		if vid == "" {
			// Records without a verdict id have nothing in common: each stands alone.
			for _, x := range a.attempts[vid] {
				a.checkVerdict(vid, []*execution{x}, now, grace)
			}
			continue
		}
		a.checkVerdict(vid, a.attempts[vid], now, grace)
	}
	a.checkConsumed()
	r.Anomalies = append(r.Anomalies, a.deferreds.check()...)
	r.Anomalies = append(r.Anomalies, a.anomalies...)
	for _, xs := range a.unstarted {
		for _, x := range xs {
			r.ConsumedNotStarted = append(r.ConsumedNotStarted, open(x))
		}
	}
	slices.SortFunc(r.ConsumedNotStarted, func(p, q OpenExecution) int { return strings.Compare(p.RecordID, q.RecordID) })
	for _, xs := range a.attempts {
		for _, x := range xs {
			if x.Decision == api.ExecutionOutcomeUnknown {
				r.OutcomeUnknown = append(r.OutcomeUnknown, open(x))
			}
		}
	}
	slices.SortFunc(r.OutcomeUnknown, func(p, q OpenExecution) int { return strings.Compare(p.RecordID, q.RecordID) })
	// Decision sources first, as the command line names them.
	slices.SortStableFunc(r.Sources, func(p, q SourceCount) int { return strings.Compare(p.Records, q.Records) })
	r.Clean = len(r.Anomalies) == 0
	return r
}

// checkConsumed reports every verdict that the records say was consumed (a presentation was
// refused as replayed or consumed_not_started) while no record accounts for the consume: no
// attempt, no consumed_without_start record, and no call that consumed it and never reached
// the server (upstream_unavailable), in any execution source. An executor that
// crashed between a shared store's consume and its started record leaves exactly that until
// it restarts and reconciles. The audit reads records, not the nonce store: a verdict
// consumed that way and never presented again shows as issued and not executed until the
// executor's reconciliation records it.
func (a *auditor) checkConsumed() {
	for _, vid := range slices.Sorted(maps.Keys(a.consumedBy)) {
		if len(a.attempts[vid]) > 0 || len(a.unstarted[vid]) > 0 || len(a.unsent[vid]) > 0 {
			continue
		}
		xs := a.consumedBy[vid]
		slices.SortFunc(xs, func(p, q *execution) int { return strings.Compare(p.RecordID, q.RecordID) })
		a.report.Anomalies = append(a.report.Anomalies, Anomaly{
			Kind: ConsumedUnaccounted, VerdictID: vid, ExecutionRecords: recordIDs(xs),
			Message: fmt.Sprintf("verdict %s was consumed (%s), but no executor recorded that it started or that it never did",
				vid, describeRefusals(xs)),
		})
	}
}

func describeRefusals(xs []*execution) string {
	return strings.Join(each(xs, func(x *execution) string {
		return fmt.Sprintf("%s refused %s on %s", x.RecordID, x.Reason, orNone(x.ExecutorID))
	}), "; ")
}

func open(x *execution) OpenExecution {
	return OpenExecution{RecordID: x.RecordID, VerdictID: x.VerdictID, ExecutorID: x.ExecutorID, Reason: x.Reason, StartedAt: x.StartedAt}
}

func (a *auditor) checkVerdict(vid string, xs []*execution, now time.Time, grace time.Duration) {
	r := &a.report
	ids := recordIDs(xs)
	add := func(an Anomaly) {
		an.VerdictID = vid
		r.Anomalies = append(r.Anomalies, an)
	}

	var issued, other []*decision
	if vid != "" {
		for _, d := range a.byVerdict[vid] {
			if d.Outcome == api.OutcomeVerdictIssued {
				issued = append(issued, d)
			} else {
				other = append(other, d)
			}
		}
	}
	if len(issued) == 0 {
		r.Pairs.Unpaired++
		for _, x := range xs {
			if d := a.byRecord[x.RefRecord]; d != nil && d.Outcome != api.OutcomeVerdictIssued && !slices.Contains(other, d) {
				other = append(other, d)
			}
		}
		if len(other) > 0 {
			d := other[0]
			add(Anomaly{
				Kind: DecisionNotIssued, DecisionRecords: decisionIDs(other), ExecutionRecords: ids,
				Message: fmt.Sprintf("decision record %s ended in outcome %q, yet verdict %s reached the tool, or may have (%s)",
					d.RecordID, d.Outcome, orNone(vid), describe(xs)),
			})
		} else {
			add(Anomaly{
				Kind: ExecutionWithoutVerdict, ExecutionRecords: ids,
				Message: fmt.Sprintf("verdict %s reached the tool, or may have (%s), but no decision record issued it",
					orNone(vid), describe(xs)),
			})
		}
	} else {
		r.Pairs.Paired++
	}
	if a.pairings {
		p := Pairing{VerdictID: vid, Issued: len(issued) > 0, DecisionRecords: decisionIDs(issued), ExecutionRecords: ids}
		if !p.Issued {
			p.DecisionRecords = decisionIDs(other)
		}
		r.Pairings = append(r.Pairings, p)
	}
	if len(issued) > 1 {
		add(Anomaly{
			Kind: VerdictIssuedTwice, DecisionRecords: decisionIDs(issued), ExecutionRecords: ids,
			Message: fmt.Sprintf("verdict %s is issued by %d decision records (%s); a verdict id is issued once",
				orNone(vid), len(issued), strings.Join(decisionIDs(issued), ", ")),
		})
	}
	if len(xs) > 1 {
		add(Anomaly{
			Kind: ExecutedMoreThanOnce, ExecutionRecords: ids,
			Message: fmt.Sprintf("verdict %s reached the tool, or may have, %d times (%s); a verdict is single-use",
				orNone(vid), len(xs), describe(xs)),
		})
	}
	if len(issued) > 0 {
		d := issued[0]
		for _, x := range xs {
			if x.ArgumentsDigest != d.ArgumentsDigest {
				add(Anomaly{
					Kind: ArgumentsDigestMismatch, DecisionRecords: []string{d.RecordID}, ExecutionRecords: []string{x.RecordID},
					Message: fmt.Sprintf("execution %s of verdict %s ran arguments %s, but decision record %s issued %s",
						x.RecordID, orNone(vid), orNone(x.ArgumentsDigest), d.RecordID, orNone(d.ArgumentsDigest)),
				})
			}
			if diffs := bindingDiff(d, x); len(diffs) > 0 {
				add(Anomaly{
					Kind: BindingMismatch, DecisionRecords: []string{d.RecordID}, ExecutionRecords: []string{x.RecordID},
					Fields: each(diffs, func(df fieldDiff) string { return df.field }),
					Message: fmt.Sprintf("execution %s of verdict %s disagrees with decision record %s on %s",
						x.RecordID, orNone(vid), d.RecordID, joinDiffs(diffs)),
				})
			}
		}
	}
	for _, x := range xs {
		if x.Decision != api.ExecutionStarted {
			continue
		}
		if grace > 0 && now.Sub(x.StartedAt) < grace {
			r.InFlight = append(r.InFlight, open(x))
			continue
		}
		add(Anomaly{
			Kind: StartedNotFinished, ExecutionRecords: []string{x.RecordID},
			Message: fmt.Sprintf("execution %s of verdict %s started at %s on executor %s and has no outcome",
				x.RecordID, orNone(vid), x.StartedAt.UTC().Format(time.RFC3339), x.ExecutorID),
		})
	}
}

type fieldDiff struct{ field, execution, decision string }

// bindingDiff compares what an execution record says it ran with what its decision record
// decided. The executor copies these from the verified verdict, so a difference means the
// verdict and the decision record disagree.
func bindingDiff(d *decision, x *execution) []fieldDiff {
	var out []fieldDiff
	for _, f := range []fieldDiff{
		{"action_key", x.ActionKey, d.ActionKey},
		{"principal", x.Principal, d.Principal},
		{"server", x.Server, d.Server},
		{"tool", x.Tool, d.Tool},
		{"ref_phase", x.RefPhase, d.Phase},
		{"ref_record", x.RefRecord, d.RecordID},
	} {
		if f.execution != f.decision {
			out = append(out, f)
		}
	}
	return out
}

func joinDiffs(ds []fieldDiff) string {
	return strings.Join(each(ds, func(d fieldDiff) string {
		return fmt.Sprintf("%s (execution %s, decision %s)", d.field, orNone(d.execution), orNone(d.decision))
	}), ", ")
}

func describe(xs []*execution) string {
	return strings.Join(each(xs, func(x *execution) string {
		return fmt.Sprintf("%s %s on %s", x.RecordID, x.Decision, orNone(x.ExecutorID))
	}), "; ")
}

func recordIDs(xs []*execution) []string {
	return each(xs, func(x *execution) string { return x.RecordID })
}

func decisionIDs(ds []*decision) []string {
	return each(ds, func(d *decision) string { return d.RecordID })
}

// each returns f of every element of xs, in order.
func each[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func orNone(s string) string { return cmp.Or(s, "(none)") }
