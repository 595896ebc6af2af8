package policytest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/offline"
	"github.com/verdictgate/verdict/policy"
)

// DefaultClock is the time of every step that names none: a test never reads the real clock.
var DefaultClock = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Runner runs test files against one policy, in process, through the real engine
// (gates.Engine with the CEL evaluator): measurements and the C3 webhook answer what each step
// says, the clock is the step's, ids are counted, and every case starts from an empty state.
// Nothing is listened on or dialled. A Runner runs one case at a time.
type Runner struct {
	pol *policy.Policy
	// inline are the tools the policy lists itself, read once as verdictd reads them.
	inline map[string]map[string]policy.InlineTool
	eng    *gates.Engine
	world  *world
	ids    *offline.CountedIDs
	cov    *Coverage
}

// NewRunner returns a Runner for the loaded policy.
func NewRunner(pol *policy.Policy) (*Runner, error) {
	w := &world{}
	ids := &offline.CountedIDs{}
	eng, err := offline.NewEngine(w.clock, ids, w, w)
	if err != nil {
		return nil, err
	}
	return &Runner{pol: pol, inline: pol.InlineTools(), eng: eng, world: w, ids: ids, cov: newCoverage(pol)}, nil
}

// Coverage is what the cases run so far exercised of the policy.
func (r *Runner) Coverage() *Coverage { return r.cov }

// FileResult is the result of one test file.
type FileResult struct {
	Path  string       `json:"file"`
	Cases []CaseResult `json:"cases"`
}

// Failed counts the file's failed cases.
func (f *FileResult) Failed() int {
	n := 0
	for _, c := range f.Cases {
		if !c.Passed() {
			n++
		}
	}
	return n
}

// CaseResult is the result of one case: it passed when it has no failure.
type CaseResult struct {
	Name     string    `json:"name"`
	Line     int       `json:"line"`
	Failures []Failure `json:"failures,omitempty"`
}

// Passed reports whether the case passed.
func (c *CaseResult) Passed() bool { return len(c.Failures) == 0 }

// Failure is one step that did not come to what it expected: the differences, or the reason
// it could not be run (Err). A case stops at its first failing step.
type Failure struct {
	Step  int    `json:"step"` // 1-based
	Line  int    `json:"line"`
	Err   string `json:"error,omitempty"`
	Diffs []Diff `json:"diffs,omitempty"`
}

// Diff is one expectation and what the step came to, each written as the test file writes it.
type Diff struct {
	Path string `json:"path"` // as in the file: outcome, known.amount, asked.to_account
	Want string `json:"want"`
	Got  string `json:"got"`
}

// Run runs every case of f and adds what they exercised to the runner's coverage.
func (r *Runner) Run(ctx context.Context, f *File) (*FileResult, error) {
	if err := r.cov.addDefinitions(r.pol, f); err != nil {
		return nil, err
	}
	res := &FileResult{Path: f.path, Cases: make([]CaseResult, 0, len(f.Cases))}
	for _, c := range f.Cases {
		cr := CaseResult{Name: c.Name, Line: c.line}
		if fail := r.runCase(ctx, f, c); fail != nil {
			cr.Failures = []Failure{*fail}
		}
		res.Cases = append(res.Cases, cr)
	}
	return res, nil
}

// conversation is a case in progress: what the steps before left.
type conversation struct {
	state     *gates.MemState
	call      Step // the call as the steps so far made it
	answers   []api.Answer
	console   []gates.ConsoleDecision
	questions map[string]api.Question // by slot: the latest asked
	last      *api.Record
	deferred  *api.Record
}

func (r *Runner) runCase(ctx context.Context, f *File, c *Case) *Failure {
	r.ids.Reset()
	cv := &conversation{state: newState(c), questions: map[string]api.Question{}}
	for i, s := range c.Steps {
		rec, err := r.step(ctx, f, c, cv, s)
		if err != nil {
			return &Failure{Step: i + 1, Line: s.line, Err: err.Error()}
		}
		r.cov.observe(r.pol, rec)
		if diffs := compare(s.Expect, rec); len(diffs) > 0 {
			return &Failure{Step: i + 1, Line: s.line, Diffs: diffs}
		}
		cv.last = rec
		if rec.Outcome == api.OutcomeDeferred {
			cv.deferred = rec
		}
		for _, q := range rec.Questions {
			cv.questions[q.SlotID] = q
		}
	}
	return nil
}

// newState is a case's empty conversation state, holding its executed values.
func newState(c *Case) *gates.MemState {
	st := gates.NewMemState()
	for key, values := range c.Prior {
		st.SetPrior(key, values)
	}
	return st
}

// step runs one step of a conversation and returns its record.
func (r *Runner) step(ctx context.Context, f *File, c *Case, cv *conversation, s *Step) (*api.Record, error) {
	cv.call.carry(s)
	if err := cv.answer(s); err != nil {
		return nil, err
	}
	if s.Console != nil {
		if cv.last == nil || cv.last.Approval == nil || cv.last.Approval.ArgumentsDigest == "" {
			return nil, errors.New("console: the step before left no approval pending in the console")
		}
		cv.console = append(cv.console, gates.ConsoleDecision{ApprovalID: fmt.Sprintf("apr_%04d", len(cv.console)+1),
			ArgumentsDigest: cv.last.Approval.ArgumentsDigest, State: s.Console.State, DecidedBy: s.Console.By})
	}
	call := &cv.call
	r.world.set(call)

	var req *api.Request
	if s.Trigger {
		if cv.deferred == nil {
			return nil, errors.New("trigger: no step before was deferred")
		}
		var err error
		if req, err = gates.TriggerRequest(cv.deferred, cv.answers, preSetData(call.PreSetData)); err != nil {
			return nil, err
		}
		if err := gates.CheckRequest(req, gates.Limits{}); err != nil {
			return nil, fmt.Errorf("the trigger request is refused: %w", err)
		}
	} else {
		body, err := request(c, call, s.NewRequest, cv.answers)
		if err != nil {
			return nil, err
		}
		if req, err = gates.DecodeRequest(body, gates.Limits{}); err != nil {
			return nil, fmt.Errorf("the request is refused: %w", err)
		}
	}
	tool, held, err := r.definition(f, req.Server, req.Tool)
	if err != nil {
		return nil, err
	}
	rec, err := r.eng.Run(ctx, gates.Input{Tool: tool, Policy: r.pol, Request: req, State: cv.state, Console: cv.console})
	if err != nil {
		return nil, fmt.Errorf("the engine decided nothing: %w", err)
	}
	offline.Hold(rec, held)
	return rec, nil
}

// definition returns the tool's definition as its server lists it (inline in the policy, or
// given by the test file), or the bare name and why verdictd cannot use it (its pin holds it
// back, or it is unusable as listed).
func (r *Runner) definition(f *File, server, tool string) (gates.Tool, error, error) {
	if r.pol.Servers[server] == nil {
		return gates.Tool{}, nil, fmt.Errorf("the policy has no server %q", server)
	}
	if t, ok := f.tools[server][tool]; ok {
		t, held := offline.Pinned(r.pol, server, t)
		return t, held, nil
	}
	if inline, ok := r.inline[server]; ok {
		if t, ok := inline[tool]; ok {
			d, held := offline.Inline(r.pol, server, t)
			return d, held, nil
		}
	} else if f.tools[server] == nil {
		return gates.Tool{}, nil, fmt.Errorf("server %q lists its tools itself (tools_from): give them under servers.%s in the test file", server, server)
	}
	// verdictd refuses a call to a tool its server does not list (unknown_tool).
	return gates.Tool{}, nil, fmt.Errorf("server %q lists no tool %q", server, tool)
}

// carry makes the call of step s from the call so far: every member s gives replaces the one
// before (cmp.Or keeps the one before where s's pointer is nil).
func (c *Step) carry(s *Step) {
	c.Server = cmp.Or(s.Server, c.Server)
	c.Tool = cmp.Or(s.Tool, c.Tool)
	c.Intent = cmp.Or(s.Intent, c.Intent)
	c.Approver = cmp.Or(s.Approver, c.Approver)
	c.Clock = cmp.Or(s.Clock, c.Clock)
	if s.Instruction != nil {
		c.Instruction = s.Instruction
	}
	if s.Arguments != nil {
		c.Arguments = s.Arguments
	}
	if s.PreSetData != nil {
		c.PreSetData = s.PreSetData
	}
	if s.UserChecklist != nil {
		c.UserChecklist = s.UserChecklist
	}
	if s.Measured != nil {
		c.Measured = s.Measured
	}
}

// answer adds the step's answers to the conversation's, each bound to the latest question
// asked for its slot.
func (cv *conversation) answer(s *Step) error {
	asked := func(slot string) (api.Question, error) {
		q, ok := cv.questions[slot]
		if !ok {
			return q, fmt.Errorf("no step before asked about %q: nothing to answer", slot)
		}
		return q, nil
	}
	for _, slot := range slices.Sorted(maps.Keys(s.Answers)) {
		q, err := asked(slot)
		if err != nil {
			return err
		}
		cv.answers = append(cv.answers, api.Answer{QuestionID: q.QuestionID, Value: api.Value{Set: true, V: s.Answers[slot]}})
	}
	for _, list := range []struct {
		slots    []string
		approved bool
	}{{s.Approve, true}, {s.Refuse, false}} {
		for _, slot := range list.slots {
			q, err := asked(slot)
			if err != nil {
				return err
			}
			a := api.Answer{QuestionID: q.QuestionID, Approved: &list.approved}
			if q.Value != nil {
				a.Value = api.Value{Set: true, V: q.Value}
			}
			cv.answers = append(cv.answers, a)
		}
	}
	return nil
}

// request writes the preflight request of call as a caller would send it.
func request(c *Case, call *Step, newRequest bool, answers []api.Answer) ([]byte, error) {
	req := api.Request{
		Principal:      c.Principal,
		ConversationID: c.Conversation,
		NewRequest:     newRequest,
		Server:         deref(call.Server),
		Tool:           deref(call.Tool),
		Instruction:    api.Instruction{Segments: call.Instruction},
		UserAnswers:    answers,
		UserChecklist:  call.UserChecklist,
		PreSetData:     preSetData(call.PreSetData),
	}
	if in := call.Intent; in != nil {
		req.Intent = &api.Intent{WhenCase: in.WhenCase}
		if in.Action != nil {
			loc, err := locate(call.Instruction, in.Action)
			if err != nil {
				return nil, fmt.Errorf("intent.action: %w", err)
			}
			req.Intent.ActionName = &loc
		}
		if in.Preset != nil {
			preset := in.Preset.request()
			req.Intent.ActionNamePreset = &preset
		}
	}
	for _, field := range slices.Sorted(maps.Keys(call.Arguments)) {
		a := call.Arguments[field]
		cand := api.Candidate{Field: field, Value: a.Value}
		if a.At != nil {
			loc, err := locate(call.Instruction, a.At)
			if err != nil {
				return nil, fmt.Errorf("arguments.%s.at: %w", field, err)
			}
			cand.Segment, cand.Span = &loc.Segment, &loc.Span
		}
		req.Candidates = append(req.Candidates, cand)
	}
	return json.Marshal(req)
}

func preSetData(in map[string]*PreSet) map[string]api.PreSet {
	if in == nil {
		return nil
	}
	out := make(map[string]api.PreSet, len(in))
	for k, p := range in {
		out[k] = p.request()
	}
	return out
}

// request is the pre-set value as a request carries it.
func (p *PreSet) request() api.PreSet {
	return api.PreSet{Value: api.Value{Set: true, V: p.Value}, Trust: p.Trust, Origin: p.Origin}
}

// locate finds the text of l in the instruction: in its segment, or in the first segment that
// holds it, as a span of code points.
func locate(segs []api.Segment, l *Location) (api.Location, error) {
	if l.Text == "" {
		return api.Location{}, errors.New("the text to point at is empty")
	}
	for i, seg := range segs {
		if l.Segment != nil && *l.Segment != i {
			continue
		}
		if at := strings.Index(seg.Text, l.Text); at >= 0 {
			start := utf8.RuneCountInString(seg.Text[:at])
			return api.Location{Segment: i, Span: api.Span{start, start + utf8.RuneCountInString(l.Text)}}, nil
		}
	}
	if l.Segment != nil {
		return api.Location{}, fmt.Errorf("segment %d does not hold %q", *l.Segment, l.Text)
	}
	return api.Location{}, fmt.Errorf("no segment of the instruction holds %q", l.Text)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// world is what the outside answers during one step: the measurements, the C3 webhook and the
// clock, as the step gives them. The engine reads it while a step runs; set changes it
// between steps only.
type world struct {
	mu       sync.Mutex
	now      time.Time
	measured map[string]*Measured
	approver *Approver
}

func (w *world) set(call *Step) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = DefaultClock
	if call.Clock != nil {
		w.now = *call.Clock
	}
	w.measured, w.approver = call.Measured, call.Approver
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

// errNotGiven is the failed lookup of a measurement the step gives no value for: a test never
// reaches a real source.
var errNotGiven = errors.New("the test gives no result for this measurement")

// Measure answers a measurement with the step's fixed result.
func (w *world) Measure(_ context.Context, m *policy.Measurement, _ map[string]any) (any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.measured[m.Name]
	switch {
	case r == nil:
		return nil, errNotGiven
	case r.Error != "":
		return nil, errors.New(r.Error)
	}
	return r.Value, nil
}

// Approve answers C3 as the step's approver does; without one the webhook does not answer.
func (w *world) Approve(_ context.Context, _ gates.ApprovalRequest) (gates.Approval, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.approver == nil {
		return gates.Approval{}, errors.New("the test gives no approver answer")
	}
	return gates.Approval{Approved: w.approver.Approved, Reason: w.approver.Reason}, nil
}
