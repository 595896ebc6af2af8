package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/store"
)

// maxAuditRows bounds the decision records the audit view lists: the newest that match.
const maxAuditRows = 500

// auditFilter is the audit view's query.
type auditFilter struct {
	From, To                         time.Time
	FromText, ToText                 string
	Server, Tool, Outcome, Principal string
}

// timeForms are what the time fields accept: an HTML datetime-local value (taken as UTC) or
// RFC 3339.
var timeForms = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339}

func parseTime(s string) (time.Time, error) {
	for _, f := range timeForms {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: write 2026-12-02T06:00 (UTC) or an RFC 3339 time", s)
}

func parseFilter(q url.Values) (auditFilter, error) {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	f := auditFilter{FromText: get("from"), ToText: get("to"), Server: get("server"), Tool: get("tool"),
		Outcome: get("outcome"), Principal: get("principal")}
	var fromErr, toErr error
	if f.FromText != "" {
		f.From, fromErr = parseTime(f.FromText)
	}
	if f.ToText != "" {
		f.To, toErr = parseTime(f.ToText)
	}
	return f, errors.Join(fromErr, toErr)
}

func (f *auditFilter) inRange(t time.Time) bool {
	return (f.From.IsZero() || !t.Before(f.From)) && (f.To.IsZero() || t.Before(f.To))
}

func (f *auditFilter) binding(principal, server, tool string) bool {
	return (f.Server == "" || f.Server == server) && (f.Tool == "" || f.Tool == tool) &&
		(f.Principal == "" || f.Principal == principal)
}

// decisionRow is one decision record in the audit view, with the attempts the audit paired
// with it.
type decisionRow struct {
	RecordID, Principal, Server, Tool, Outcome, VerdictID string
	Time                                                  time.Time
	Executions                                            []*executionRow
	Anomalies                                             []audit.Kind
}

type executionRow struct {
	RecordID, ExecutorID, Decision, Reason, VerdictID string
	Principal, Server, Tool                           string
	StartedAt                                         time.Time
	Anomalies                                         []audit.Kind
}

// auditView is the audit page.
type auditView struct {
	Filter    auditFilter
	Rows      []*decisionRow
	Matched   int // decision records that matched, of which Rows are the newest maxAuditRows
	Unpaired  []*executionRow
	Report    *audit.Report
	Outcomes  []string
	Values    bool
	Anomalies []audit.Anomaly
}

// collector keeps, while the audit reads the sources, what the view lists of each record: ids,
// bindings and outcomes, never values (the audit reads masked exports).
type collector struct {
	mu         sync.Mutex
	filter     auditFilter
	decisions  []*decisionRow
	executions map[string]*executionRow
	outcomes   map[string]bool
}

type decisionSource struct {
	audit.Source
	c *collector
}

func (d decisionSource) Decisions(ctx context.Context, fn func(*store.Decision) error) error {
	return d.Source.Decisions(ctx, func(x *store.Decision) error {
		if err := d.c.addDecision(x); err != nil {
			return err
		}
		return fn(x)
	})
}

type executionSource struct {
	audit.Source
	c *collector
}

func (e executionSource) Executions(ctx context.Context, fn func(*api.ExecutionRecord) error) error {
	return e.Source.Executions(ctx, func(x *api.ExecutionRecord) error {
		e.c.addExecution(x)
		return fn(x)
	})
}

// recordHead is what the view reads of a decision record's body.
type recordHead struct {
	Principal string `json:"principal"`
	Server    string `json:"server"`
	Tool      string `json:"tool"`
}

func (c *collector) addDecision(d *store.Decision) error {
	var h recordHead
	if err := apijson.Unmarshal(d.Record, &h); err != nil {
		return fmt.Errorf("decision record %s: %w", d.RecordID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[d.Outcome] = true
	if !c.filter.inRange(d.Time) || !c.filter.binding(h.Principal, h.Server, h.Tool) {
		return nil
	}
	c.decisions = append(c.decisions, &decisionRow{RecordID: d.RecordID, Principal: h.Principal, Server: h.Server,
		Tool: h.Tool, Outcome: d.Outcome, VerdictID: d.VerdictID, Time: d.Time})
	return nil
}

func (c *collector) addExecution(x *api.ExecutionRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[string(x.Decision)] = true
	if prev, ok := c.executions[x.RecordID]; ok && prev.Decision != string(api.ExecutionStarted) {
		return // a final copy is kept over a started one, as the audit does
	}
	c.executions[x.RecordID] = &executionRow{RecordID: x.RecordID, ExecutorID: x.ExecutorID, Decision: string(x.Decision),
		Reason: x.Reason, VerdictID: x.VerdictID, Principal: x.Principal, Server: x.Server, Tool: x.Tool, StartedAt: x.StartedAt}
}

// runAudit reads both daemons' exports through package audit, which pairs the records and
// finds the anomalies, and lays its report out for the view.
func (s *Server) runAudit(ctx context.Context, f auditFilter) (*auditView, error) {
	c := &collector{filter: f, executions: map[string]*executionRow{}, outcomes: map[string]bool{}}
	rep, err := audit.Run(ctx,
		[]audit.Source{decisionSource{Source: s.verdictdSource, c: c}},
		[]audit.Source{executionSource{Source: s.executorSource, c: c}},
		audit.Options{Pairings: true, StartedGrace: 2 * time.Minute, Now: s.now})
	if err != nil {
		return nil, err
	}
	kinds := map[string][]audit.Kind{}
	for _, a := range rep.Anomalies {
		for _, id := range append(slices.Clone(a.DecisionRecords), a.ExecutionRecords...) {
			if !slices.Contains(kinds[id], a.Kind) {
				kinds[id] = append(kinds[id], a.Kind)
			}
		}
	}
	byDecision := map[string][]string{}
	v := &auditView{Filter: f, Report: rep, Anomalies: rep.Anomalies}
	for _, p := range rep.Pairings {
		if p.Issued {
			for _, d := range p.DecisionRecords {
				byDecision[d] = p.ExecutionRecords
			}
			continue
		}
		for _, id := range p.ExecutionRecords {
			x := c.executions[id]
			if x == nil || !f.inRange(x.StartedAt) || !f.binding(x.Principal, x.Server, x.Tool) {
				continue
			}
			x.Anomalies = kinds[id]
			v.Unpaired = append(v.Unpaired, x)
		}
	}
	for _, d := range c.decisions {
		d.Anomalies = kinds[d.RecordID]
		for _, id := range byDecision[d.RecordID] {
			if x := c.executions[id]; x != nil {
				x.Anomalies = kinds[id]
				d.Executions = append(d.Executions, x)
			}
		}
		if f.Outcome != "" && d.Outcome != f.Outcome && !slices.ContainsFunc(d.Executions, func(x *executionRow) bool { return x.Decision == f.Outcome }) {
			continue
		}
		v.Rows = append(v.Rows, d)
	}
	slices.SortFunc(v.Rows, func(a, b *decisionRow) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(b.RecordID, a.RecordID))
	})
	v.Matched = len(v.Rows)
	if len(v.Rows) > maxAuditRows {
		v.Rows = v.Rows[:maxAuditRows]
	}
	v.Outcomes = slices.Sorted(maps.Keys(c.outcomes))
	return v, nil
}

// handleAudit shows the decision and execution pairs that match the filter.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.mayAudit(w, r, sess) {
		return
	}
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		pr := &problem{Status: http.StatusBadRequest, Code: codeBadForm, Words: err.Error()}
		s.render(w, r, http.StatusBadRequest, "audit", signedInWith(sess, "Audit", &auditView{Filter: f}, pr))
		return
	}
	v, err := s.runAudit(r.Context(), f)
	if err != nil {
		s.metrics.audits.WithLabelValues(codeAuditFailed).Inc()
		s.log.Warn("audit", "error", err.Error())
		pr := &problem{Status: http.StatusBadGateway, Code: codeAuditFailed, Words: words(codeAuditFailed, ""), Details: err.Error()}
		s.render(w, r, http.StatusBadGateway, "audit", signedInWith(sess, "Audit", &auditView{Filter: f}, pr))
		return
	}
	s.metrics.audits.WithLabelValues("ok").Inc()
	v.Values = sess.inGroup(s.cfg.ValuesGroups)
	s.render(w, r, http.StatusOK, "audit", signedIn(sess, "Audit", v))
}

// mayAudit reports whether the session may read the audit view and record pages, and answers
// 403 when it may not: with audit_groups set, only their members and values_groups' may.
func (s *Server) mayAudit(w http.ResponseWriter, r *http.Request, sess session) bool {
	if len(s.cfg.AuditGroups) == 0 || sess.inGroup(s.cfg.AuditGroups) || sess.inGroup(s.cfg.ValuesGroups) {
		return true
	}
	s.renderProblemAs(w, r, sess, problem{Status: http.StatusForbidden, Code: codeNotAuditor, Words: words(codeNotAuditor, "")})
	return false
}

// recordView is one record's page.
type recordView struct {
	RecordID, Kind                         string // Kind: "decision" or "execution"
	Principal, Server, Tool, Outcome, Time string
	VerdictID, RefRecord                   string
	JSON                                   string
	Masked                                 bool
	Executions                             []*executionRow
}

// handleRecord shows one decision or execution record. Argument values are shown to members of
// values_groups only: for everyone else verdictd masks them before they leave it.
func (s *Server) handleRecord(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.mayAudit(w, r, sess) {
		return
	}
	id := r.PathValue("id")
	if !approvalIDPattern.MatchString(id) {
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusNotFound, Code: codeRecordNotFound, Words: words(codeRecordNotFound, "")})
		return
	}
	values := sess.inGroup(s.cfg.ValuesGroups)
	v := &recordView{RecordID: id, Masked: !values}
	var raw json.RawMessage
	var err error
	if strings.HasPrefix(id, "exe_") {
		v.Kind = "execution"
		raw, err = s.execs.Execution(r.Context(), id)
	} else {
		v.Kind = "decision"
		raw, err = s.records.Record(r.Context(), id, !values)
	}
	if err != nil {
		if ce, ok := errors.AsType[*client.Error](err); ok && ce.Status == http.StatusNotFound {
			s.renderProblemAs(w, r, sess, problem{Status: http.StatusNotFound, Code: codeRecordNotFound, Words: words(codeRecordNotFound, "")})
			return
		}
		s.log.Warn("record", "record_id", id, "error", err.Error())
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadGateway, Code: codeUnavailable,
			Words: "The record could not be read.", Details: err.Error()})
		return
	}
	var head struct {
		Principal string `json:"principal"`
		Server    string `json:"server"`
		Tool      string `json:"tool"`
		Outcome   string `json:"outcome"`
		Decision  string `json:"execution_decision"`
		Timestamp string `json:"timestamp"`
		StartedAt string `json:"started_at"`
		VerdictID string `json:"verdict_id"`
		RefRecord string `json:"ref_record"`
	}
	var body map[string]jsontext.Value
	if err := apijson.Unmarshal(raw, &head); err != nil || apijson.Unmarshal(raw, &body) != nil {
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadGateway, Code: codeBadAnswer, Words: words(codeBadAnswer, "")})
		return
	}
	// The verdict token is a credential for one call, not a value to review: never shown.
	delete(body, "verdict")
	shown, err := json.Marshal(body)
	if err != nil {
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadGateway, Code: codeBadAnswer, Words: words(codeBadAnswer, "")})
		return
	}
	v.JSON, _ = shownJSON(shown)
	v.Principal, v.Server, v.Tool = head.Principal, head.Server, head.Tool
	v.Outcome, v.Time = cmp.Or(head.Outcome, head.Decision), cmp.Or(head.Timestamp, head.StartedAt)
	v.VerdictID, v.RefRecord = head.VerdictID, head.RefRecord
	if v.Kind == "decision" && v.VerdictID != "" {
		_, err := s.execs.Executions(r.Context(), client.Query{VerdictID: v.VerdictID, Mask: true}, func(line json.RawMessage) error {
			var x struct {
				RecordID   string    `json:"record_id"`
				ExecutorID string    `json:"executor_id"`
				Decision   string    `json:"execution_decision"`
				Reason     string    `json:"reason"`
				StartedAt  time.Time `json:"started_at"`
			}
			if err := apijson.Unmarshal(line, &x); err != nil {
				return err
			}
			v.Executions = append(v.Executions, &executionRow{RecordID: x.RecordID, ExecutorID: x.ExecutorID,
				Decision: x.Decision, Reason: x.Reason, StartedAt: x.StartedAt})
			return nil
		})
		if err != nil {
			s.log.Warn("record executions", "verdict_id", v.VerdictID, "error", err.Error())
			v.Executions = nil
			pr := &problem{Status: http.StatusBadGateway, Code: codeUnavailable,
				Words: "The executions of this record's verdict could not be read completely, so none are listed.", Details: err.Error()}
			s.render(w, r, http.StatusOK, "record", signedInWith(sess, "Record "+id, v, pr))
			return
		}
	}
	s.render(w, r, http.StatusOK, "record", signedIn(sess, "Record "+id, v))
}
