// Package replay decides recorded preflights again under a candidate policy, in process, and
// reports what would change: `verdictd policy replay`. A record can be decided again only
// when verdictd kept its capture (records.capture_requests, api.Capture): the request as
// decoded, the tool's definition, the state, measurements and approvals the run read. A
// record without one is counted as not replayable, never guessed at.
//
// The engine is the one verdictd runs (internal/offline), on the recorded run's clock, its
// state reads, measurements and webhook answer as captured. What a capture cannot hold is
// not reproduced: a measurement or webhook the recorded run did not ask (the candidate policy
// may ask them) fails as a lookup that failed, and is named in the call's report; an answer
// the user would have given to a question the candidate policy asks is not known, so the
// call stops where it would have asked.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/offline"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// Options select the records replayed.
type Options struct {
	// Since leaves out records decided before it (zero: none).
	Since time.Time
	// Tools, when not empty, keeps only records of these tools: "server/tool", or a tool name
	// of any server.
	Tools []string
}

func (o *Options) keep(d *store.Decision, server, tool string) bool {
	if !o.Since.IsZero() && d.Time.Before(o.Since) {
		return false
	}
	if len(o.Tools) == 0 {
		return true
	}
	return slices.Contains(o.Tools, server+"/"+tool) || slices.Contains(o.Tools, tool)
}

// Changes of a call, in the order a report lists them: a call the candidate policy would now
// let run comes first.
const (
	ChangeAllowed = "now_allowed" // it did not run, and now would
	ChangeRefused = "now_refused" // it ran, and now would not
	ChangeOther   = "changed"     // another outcome, neither running
)

// OutcomeUnknownTool is the after-outcome of a call to a server or tool the candidate policy
// does not have: verdictd refuses it (404 unknown_tool) and records nothing.
const OutcomeUnknownTool = api.CodeUnknownTool

// Reasons a record is not replayable.
const (
	NotCaptured  = "not_captured"  // verdictd kept no capture with it
	MaskedRecord = "masked"        // its capture was masked on export
	BadCapture   = "bad_capture"   // its capture does not decode
	NotDecidable = "not_decidable" // the engine decided nothing on it
)

// Report is the result of a replay.
type Report struct {
	PolicyVersion string `json:"policy_version"` // the candidate's
	Records       int    `json:"records"`        // read and selected
	Replayed      int    `json:"replayed"`
	NotReplayable int    `json:"not_replayable"`
	Changed       int    `json:"changed"`
	// Calls are the calls whose outcome changes: now allowed first, then now refused, then
	// the others, each in the order decided.
	Calls []Call `json:"calls"`
	// Skipped are the records not replayed, with why, in the order decided.
	Skipped []Skipped `json:"not_replayed"`
	// Tools sums up the records per tool, by server and tool name.
	Tools []ToolSummary `json:"tools"`
}

// Call is one recorded call whose outcome the candidate policy changes.
type Call struct {
	RecordID  string `json:"record_id"`
	Timestamp string `json:"timestamp"`
	Principal string `json:"principal"`
	Server    string `json:"server"`
	Tool      string `json:"tool"`
	Before    string `json:"before"`
	After     string `json:"after"`
	Gate      string `json:"gate"` // the gate that decided after
	Change    string `json:"change"`
	// Asked are the slots the candidate would now ask about that the recorded run did not.
	Asked []string `json:"asked"`
	// NotCaptured names what the candidate asked for that the capture does not hold
	// ("measurement NAME", "webhook"): the after-outcome stands on its failure.
	NotCaptured []string `json:"not_captured,omitempty"`
}

// Skipped is a record that was not replayed.
type Skipped struct {
	RecordID string `json:"record_id"`
	Server   string `json:"server"`
	Tool     string `json:"tool"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail,omitempty"`
}

// ToolSummary counts one tool's records.
type ToolSummary struct {
	Server        string `json:"server"`
	Tool          string `json:"tool"`
	Records       int    `json:"records"`
	Replayed      int    `json:"replayed"`
	NotReplayable int    `json:"not_replayable"`
	Changed       int    `json:"changed"`
	NowAllowed    int    `json:"now_allowed"`
	NowRefused    int    `json:"now_refused"`
}

// Replayer decides records again under one policy. A Replayer decides one record at a time.
type Replayer struct {
	pol *policy.Policy
	// inline are the tools the candidate lists itself, read once as verdictd reads them.
	inline map[string]map[string]policy.InlineTool
	eng    *gates.Engine
	clock  *offline.Clock
	ids    *offline.CountedIDs
}

// New returns a Replayer for the loaded candidate policy.
func New(pol *policy.Policy) (*Replayer, error) {
	r := &Replayer{pol: pol, inline: pol.InlineTools(), clock: &offline.Clock{}, ids: &offline.CountedIDs{}}
	var err error
	if r.eng, err = offline.NewEngine(r.clock.Now, r.ids, nil, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// Run reads the decision records of every source (a record found in several is replayed
// once), replays those opts selects, and reports. An error means a source could not be read
// to its end: nothing is reported on part of the records.
func (r *Replayer) Run(ctx context.Context, sources []audit.Source, opts Options) (*Report, error) {
	rep := &Report{PolicyVersion: r.pol.Version, Calls: []Call{}, Skipped: []Skipped{}, Tools: []ToolSummary{}}
	seen := map[string]bool{}
	tools := map[[2]string]*ToolSummary{}
	var changed []Call
	for _, src := range sources {
		err := src.Decisions(ctx, func(d *store.Decision) error {
			if seen[d.RecordID] {
				return nil
			}
			seen[d.RecordID] = true
			return r.add(ctx, d, opts, rep, tools, &changed)
		})
		if err != nil {
			return nil, &audit.SourceError{Source: src.String(), Records: "decision", Err: err}
		}
	}
	for _, want := range []string{ChangeAllowed, ChangeRefused, ChangeOther} {
		for _, c := range changed {
			if c.Change == want {
				rep.Calls = append(rep.Calls, c)
			}
		}
	}
	for _, t := range tools {
		rep.Tools = append(rep.Tools, *t)
	}
	slices.SortFunc(rep.Tools, func(a, b ToolSummary) int {
		return strings.Compare(a.Server+"/"+a.Tool, b.Server+"/"+b.Tool)
	})
	return rep, nil
}

// question is what replay reads of a recorded question: the slot it asked about.
type question struct {
	SlotID string `json:"slot_id"`
}

// recorded is what replay reads of a stored record.
type recorded struct {
	RecordID  string     `json:"record_id"`
	Principal string     `json:"principal"`
	Server    string     `json:"server"`
	Tool      string     `json:"tool"`
	Outcome   string     `json:"outcome"`
	Timestamp string     `json:"timestamp"`
	Questions []question `json:"questions"`
	// Capture is the record's capture as stored: an object, or "***" in a masked export.
	Capture json.RawMessage `json:"capture"`
}

func (r *Replayer) add(ctx context.Context, d *store.Decision, opts Options, rep *Report, tools map[[2]string]*ToolSummary, changed *[]Call) error {
	var rec recorded
	if err := apijson.Unmarshal(d.Record, &rec); err != nil {
		return fmt.Errorf("record %s: %w", d.RecordID, err)
	}
	if !opts.keep(d, rec.Server, rec.Tool) {
		return nil
	}
	ts := tools[[2]string{rec.Server, rec.Tool}]
	if ts == nil {
		ts = &ToolSummary{Server: rec.Server, Tool: rec.Tool}
		tools[[2]string{rec.Server, rec.Tool}] = ts
	}
	rep.Records++
	ts.Records++
	out, err := r.decide(ctx, &rec)
	if err != nil {
		sk := Skipped{RecordID: rec.RecordID, Server: rec.Server, Tool: rec.Tool, Reason: NotDecidable, Detail: err.Error()}
		if se, ok := errors.AsType[*SkipError](err); ok {
			sk.Reason, sk.Detail = se.Reason, se.Detail
		}
		rep.Skipped = append(rep.Skipped, sk)
		rep.NotReplayable++
		ts.NotReplayable++
		return nil
	}
	rep.Replayed++
	ts.Replayed++
	if out == nil {
		return nil
	}
	rep.Changed++
	ts.Changed++
	switch out.Change {
	case ChangeAllowed:
		ts.NowAllowed++
	case ChangeRefused:
		ts.NowRefused++
	}
	*changed = append(*changed, *out)
	return nil
}

// SkipError is why a record cannot be decided again.
type SkipError struct {
	Reason string // NotCaptured, MaskedRecord, BadCapture
	Detail string
}

func (e *SkipError) Error() string {
	if e.Detail == "" {
		return "replay: " + e.Reason
	}
	return "replay: " + e.Reason + ": " + e.Detail
}

// decide decides one stored record again and returns its change, or nil when its outcome
// stays. A record that cannot be decided again is a *SkipError.
func (r *Replayer) decide(ctx context.Context, rec *recorded) (*Call, error) {
	bad := func(format string, a ...any) error {
		return &SkipError{Reason: BadCapture, Detail: fmt.Sprintf(format, a...)}
	}
	switch raw := bytes.TrimSpace(rec.Capture); {
	case len(raw) == 0 || string(raw) == "null":
		return nil, &SkipError{Reason: NotCaptured}
	case raw[0] == '"':
		return nil, &SkipError{Reason: MaskedRecord, Detail: "read the records unmasked"}
	}
	c := new(api.Capture)
	if err := apijson.Unmarshal(rec.Capture, c); err != nil { // values as a request's: exact numbers
		return nil, bad("%v", err)
	}
	req, err := gates.DecodeRequest(c.Request, gates.Limits{})
	if err != nil {
		return nil, bad("request: %v", err)
	}
	now, err := time.Parse(time.RFC3339Nano, c.Now)
	if err != nil {
		return nil, bad("now: %v", err)
	}
	tool := gates.Tool{Name: req.Tool}
	if c.Tool != nil {
		if err := apijson.Unmarshal(c.Tool, &tool); err != nil || tool.Name != req.Tool {
			return nil, bad("tool definition: %v", err)
		}
	}
	out := &Call{RecordID: rec.RecordID, Timestamp: rec.Timestamp, Principal: rec.Principal, Server: rec.Server,
		Tool: rec.Tool, Before: rec.Outcome, Asked: []string{}}
	// A server the candidate lists the tools of itself decides on its own definition, as
	// verdictd does; one whose tools are listed from the live server is taken to list the tool
	// still, with the definition captured.
	var held error
	inline, isInline := r.inline[req.Server]
	listed, ok := inline[req.Tool]
	switch {
	case r.pol.Servers[req.Server] == nil || isInline && !ok:
		out.After, out.Gate = OutcomeUnknownTool, OutcomeUnknownTool
		return out.classify(), nil
	case isInline:
		tool, held = offline.Inline(r.pol, req.Server, listed)
	default:
		tool, held = offline.Pinned(r.pol, req.Server, tool)
	}
	r.clock.Set(now)
	r.ids.Reset()
	rp := gates.NewReplay(c)
	after, err := r.eng.Run(ctx, rp.Input(gates.Input{Tool: tool, Policy: r.pol, Request: req}))
	if err != nil {
		return nil, err
	}
	offline.Hold(after, held)
	if after.Outcome == rec.Outcome {
		return nil, nil
	}
	out.After, out.Gate, out.NotCaptured = after.Outcome, after.Gate.Kind, rp.Misses()
	for _, q := range after.Questions {
		if !slices.Contains(rec.Questions, question{q.SlotID}) {
			out.Asked = append(out.Asked, q.SlotID)
		}
	}
	return out.classify(), nil
}

// runs reports whether a call with the outcome runs: a verdict, or a tool that is not gated.
func runs(outcome string) bool {
	return outcome == api.OutcomeVerdictIssued || outcome == api.OutcomeNotGated
}

func (c *Call) classify() *Call {
	switch before, after := runs(c.Before), runs(c.After); {
	case !before && after:
		c.Change = ChangeAllowed
	case before && !after:
		c.Change = ChangeRefused
	default:
		c.Change = ChangeOther
	}
	return c
}
