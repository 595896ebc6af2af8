package gates

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
)

// Messages shown to the user. None of them names a tool, a schema or a property.
const (
	msgIntentWhen      = "When should this happen?"
	msgIntentWhat      = "What would you like to do? Please describe the action in your own words."
	msgIntentBoth      = "What would you like to do, and when?"
	msgIntentExhausted = "I could not work out what you want to do. Please start a new request."
	msgTool            = "I am not sure the available action does what you asked for. Could you restate what you want to happen?"
	msgToolExhausted   = "The requested action could not be matched to an available action. Please start a new request."
	msgBranchUnresolve = "A few more details are needed to tell what you mean. Which of these can you give?"
	msgBranchConflict  = "The details given point to different things. Which of these did you mean?"
	msgGenericValue    = "Please provide the missing detail."
)

// Run performs one preflight and returns its decision record. The outcome is data: a blocked
// run is a record, not an error. An error means the run could not be decided at all (the
// state store or id source failed, or the input is inconsistent) and nothing may proceed; an
// at_trigger request whose intent no longer yields its action_key is a *RequestError.
//
// The run's expressions — provider conditions, then the policy's checklist items, then the
// request's — share the engine's evaluation budget. Each is charged what its evaluation cost;
// the one that takes the total past the budget and every one after it are over budget, and
// none of them counts, so a run does at most the budget plus one expression's work. An
// expression of the policy over budget is definition repair, never a pass. A request item
// over budget refuses the whole request with a *RequestError (evaluation_budget_exceeded):
// the caller sent more work than a preflight does, and fewer or cheaper items may pass. Once
// the policy's own expressions went over, the request's items are definition repair too: the
// policy needs the repair, and the request is not refused for it.
func (e *Engine) Run(ctx context.Context, in Input) (*api.Record, error) {
	if in.Request == nil || in.Policy == nil {
		return nil, errors.New("gates: Input needs a api.Request and a Policy")
	}
	if in.Tool.Name != in.Request.Tool {
		return nil, fmt.Errorf("gates: tool definition %q does not match requested tool %q", in.Tool.Name, in.Request.Tool)
	}
	st := cmp.Or(in.State, e.state)
	if st == nil {
		return nil, errors.New("gates: no State: neither Input.State nor Config.State is set")
	}
	r := &run{e: e, ctx: ctx, in: in, req: in.Request, state: st, measurer: cmp.Or(in.Measurer, e.measurer),
		webhook: cmp.Or(in.Webhook, e.webhook), now: e.clock().UTC(), backing: &recordBacking{}}
	r.stampStr = r.now.Format(stampLayout)
	r.spans = newSpanIndex(&r.req.Instruction)
	r.ptool = in.Policy.Tool(r.req.Server, r.req.Tool)
	r.conv = Conversation{Principal: r.req.Principal, ID: r.req.ConversationID}
	if err := r.do(); err != nil {
		return nil, err
	}
	return r.rec, nil
}

type run struct {
	e     *Engine
	ctx   context.Context
	in    Input
	req   *api.Request
	state State // in.State, or the engine's
	// measurer and webhook are in.Measurer and in.Webhook, or the engine's.
	measurer Measurer
	webhook  Approver
	now      time.Time
	ptool    *policy.Tool
	conv     Conversation
	def      *definition
	rec      *api.Record
	spans    *spanIndex

	stampStr  string
	actionKey string
	phase     string

	resolved   map[string]*resolution
	candidates candidateIndex
	cascade    []api.Source // policy.Cascade(), shared by the slots of this run
	answers    map[string]answer
	approved   map[string]approvalAnswer
	reviewed   map[string]reviewAnswer // review_draft answers by slot
	// console is the console decision bound to this call's arguments digest (callDigest, set
	// once the call is complete and its tool takes console approvals); consoleUsed is that
	// decision once an approval slot acted on it, and refusal the reason it refused the call.
	console     *ConsoleDecision
	consoleUsed *ConsoleDecision
	callDigest  string
	refusal     string
	chosen      []string
	mres        map[string]*mresult
	checks      []checkItem

	// evalCost is what the run's expressions cost so far; overBudget is set by the first one
	// that took it past the engine's budget, policyOverBudget when that one was the policy's.
	evalCost         uint64
	overBudget       bool
	policyOverBudget bool

	backing *recordBacking
}

// recordBacking is a run's record together with the storage its pointer fields point at, so
// that the record and its fixed checklist cost one allocation rather than one per field.
// Nothing writes through those pointers once the run has set them.
type recordBacking struct {
	rec   api.Record
	fixed api.Fixed
	c3    api.C3Result

	toolDigest, whenCase, actionName, c2Source, providerAction, actionKey, phase, argsDigest string
	unknown                                                                                  int
}

// stampLayout is the record's time format: RFC 3339 in UTC with milliseconds.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

func ptr[T any](v T) *T { return &v }

func (r *run) do() error {
	id, err := r.e.ids.NewID("rec")
	if err != nil {
		return err
	}
	r.rec = &r.backing.rec
	*r.rec = api.Record{
		SchemaVersion:    api.SchemaVersion,
		RecordID:         id,
		Principal:        r.req.Principal,
		ConversationID:   r.req.ConversationID,
		Server:           r.req.Server,
		Tool:             r.req.Tool,
		PolicyVersion:    r.in.Policy.Version,
		Unmet:            []api.Unmet{},
		AskCeiling:       []string{},
		Questions:        []api.Question{},
		RejectedAnswers:  []api.RejectedAns{},
		Notices:          []string{},
		InstructionPlain: r.req.Instruction.Plain,
		Timestamp:        r.stampStr,
	}
	if r.req.NewRequest {
		if err := r.state.ResetConversation(r.ctx, r.conv); err != nil {
			return fmt.Errorf("gates: reset conversation: %w", err)
		}
	}
	// Reads and reversible calls are decided before anything else and never receive a verdict.
	if c := r.ptool.EffectiveClass(); c != policy.Irreversible {
		r.rec.Gate = api.Gate{Kind: api.GateNotGated, Detail: "class " + string(c)}
		r.rec.Outcome = api.OutcomeNotGated
		return nil
	}
	if r.def, err = r.e.defs.get(r.in.Tool); err != nil {
		return fmt.Errorf("gates: %w", err)
	}
	r.backing.toolDigest = r.def.digest
	r.rec.ToolSchemaDigest = &r.backing.toolDigest
	if done, err := r.gate1(); done || err != nil {
		return err
	}
	if r.ptool != nil {
		r.rec.Notices = append(r.rec.Notices, r.ptool.Notices...)
	}
	if gate := repairGate(r.def, r.ptool); gate != nil {
		r.rec.Gate = *gate
		r.rec.Outcome = api.OutcomeDefinitionRepair
		return nil
	}
	// The provider's [Notice] labels and the policy's notices often say the same thing; the user
	// is shown each text once.
	for _, n := range r.def.labels.Notices {
		if !slices.Contains(r.rec.Notices, n) {
			r.rec.Notices = append(r.rec.Notices, n)
		}
	}
	r.rec.AdvisoryNotes = r.def.labels.Advisory
	return r.valueGate()
}

// gate1 settles the fixed checklist. It reports done when the run ends here.
func (r *run) gate1() (bool, error) {
	b := r.backing
	fixed := &b.fixed
	r.rec.Fixed = fixed
	var issues []map[string]any
	wc, whenIssue := r.c1()
	if whenIssue != nil {
		issues = append(issues, whenIssue)
	}
	if wc != "" {
		b.whenCase = wc
		fixed.C1WhenCase = &b.whenCase
	}
	c2, c2src, c2norm, c2code := r.c2()
	if c2 == "" {
		issues = append(issues, map[string]any{"slot": api.C2SlotID, "code": c2code})
	} else {
		b.actionName, b.c2Source = c2, c2src
		fixed.C2UserActionName, fixed.C2Source = &b.actionName, &b.c2Source
	}
	if whenIssue != nil || c2 == "" {
		return true, r.intentUndetermined(whenIssue != nil, c2 == "", issues)
	}
	r.actionKey = r.req.Principal + ":" + c2norm + ":" + r.req.Server + "/" + r.req.Tool
	atTrigger := r.req.Phase != nil && *r.req.Phase == api.PhaseAtTrigger
	if atTrigger && r.req.ActionKey != nil && *r.req.ActionKey != r.actionKey {
		// A trigger reruns a stored intent; one whose intent now names another action is not it.
		return true, badRequest(api.CodeInvalidRequest, "action_key does not match the request's action")
	}
	b.actionKey = r.actionKey
	r.rec.ActionKey = &b.actionKey
	r.phase = api.PhaseAtTrigger
	if wc != "immediate" && !atTrigger {
		r.phase = api.PhaseAtInstruction
	}
	b.phase = r.phase
	r.rec.Phase = &b.phase

	// C3: only an explicit approval passes.
	ap := r.approve(ApprovalRequest{Principal: r.req.Principal, Server: r.req.Server, Tool: r.req.Tool,
		UserActionName: c2, Normalized: c2norm, Policy: r.ptool})
	b.providerAction = r.req.Tool
	fixed.C3ProviderAction = &b.providerAction
	fixed.C3Match = &b.c3
	if ap.Approved {
		b.c3 = api.C3Result{Approved: true, By: ap.By, Reason: ap.Reason}
		return false, nil
	}
	b.c3 = api.C3Result{Approved: false, Reason: ap.Reason}
	return true, r.toolUndetermined(c2, ap.Reason)
}

// c1 settles the timing: one of the four values, allowed by the tool; never defaulted, except
// that a tool declaring a single timing has no timing item at all. It returns the timing, or
// the issue that asks for it.
func (r *run) c1() (string, map[string]any) {
	fixed := &r.backing.fixed
	allowed := policy.AllowedWhenCases(r.ptool) // recurring only with a recurrence to bound it
	var raw json.RawMessage
	if r.req.Intent != nil {
		raw = r.req.Intent.WhenCase
	}
	if len(raw) == 0 || string(raw) == "null" {
		if len(allowed) == 1 && r.ptool != nil && r.ptool.WhenCases != nil {
			fixed.C1Source = "policy"
			return allowed[0], nil
		}
		return "", map[string]any{"slot": api.C1SlotID, "code": "missing"}
	}
	s, ok := r.e.whenCase(raw)
	switch {
	case !ok:
		return "", map[string]any{"slot": api.C1SlotID, "code": "out_of_enum", "detail": string(raw)}
	case !slices.Contains(allowed, s):
		return "", map[string]any{"slot": api.C1SlotID, "code": "not_allowed", "detail": s}
	}
	fixed.C1Source = "instruction"
	return s, nil
}

// c2 settles the action's name: a location in a user segment, else a user-trusted pre-set
// fallback. It returns the name, its source and its normal form, or the code of the issue
// that asks for it.
func (r *run) c2() (name, source, norm, code string) {
	name, norm, code = r.locatedActionName()
	if name != "" {
		return name, "instruction", norm, ""
	}
	if p := intentPreset(r.req); p != nil && p.Trust == TrustUser {
		if s, ok := p.Value.V.(string); ok {
			if n := Normalize(s); n != "" {
				return s, string(api.SourcePreSetData), n, ""
			}
		}
	}
	return "", "", "", cmp.Or(code, "unresolved")
}

// locatedActionName is the action's name at its location in a user segment, and its normal
// form. Like a value, the action name grounds only from whole tokens: "send mon" out of "send
// money" is not what the user typed, and code says so.
func (r *run) locatedActionName() (name, norm, code string) {
	if r.req.Intent == nil || r.req.Intent.ActionName == nil || r.req.Instruction.Plain {
		return "", "", ""
	}
	loc := r.req.Intent.ActionName
	if loc.Segment < 0 || loc.Segment >= len(r.req.Instruction.Segments) || r.req.Instruction.Segments[loc.Segment].Trust != TrustUser {
		return "", "", ""
	}
	t, ok := r.spans.text(loc.Segment, loc.Span)
	switch {
	case !ok:
		return "", "", ""
	case !r.spans.wholeTokens(loc.Segment, loc.Span):
		return "", "", RejectPartialToken
	}
	if n := Normalize(t); n != "" {
		return t, n, ""
	}
	return "", "", ""
}

// approve asks whether the user's action is the tool's: the phrase approver first, then the
// tool's webhook approver when the policy names one.
func (r *run) approve(areq ApprovalRequest) Approval {
	ap, _ := PhraseApprover{}.Approve(r.ctx, areq)
	if ap.Approved || r.ptool == nil || r.ptool.Approver == nil {
		return ap
	}
	if r.webhook == nil {
		return Approval{Reason: "webhook approver not configured"}
	}
	got, err := r.webhook.Approve(r.ctx, areq)
	switch {
	case err != nil:
		return Approval{Reason: "approver error: " + err.Error()}
	case got.Approved:
		return Approval{Approved: true, By: "webhook", Reason: got.Reason}
	}
	return Approval{Reason: got.Reason}
}

func (r *run) intentUndetermined(when, what bool, issues []map[string]any) error {
	counts, err := r.state.Gate1Counts(r.ctx, r.conv)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	attempt := max(counts.Intent, r.req.IntentAttempt, 0)
	diag := map[string]any{"issues": issues, "attempt": attempt, "limit": api.IntentAskLimit, "candidate_tool": r.req.Tool}
	if r.rec.Outcome = askOutcome(attempt >= api.IntentAskLimit); r.rec.Outcome == api.OutcomeExhausted {
		r.rec.Gate = api.Gate{Kind: api.GateIntentUndeterminedExhausted, UserMessage: msgIntentExhausted,
			NextIntentAttempt: &api.NextIntentAttempt{}, Diag: diag}
		return nil
	}
	msg, slot := msgIntentBoth, api.C2SlotID
	switch {
	case when && !what:
		msg, slot = msgIntentWhen, api.C1SlotID
	case what && !when:
		msg = msgIntentWhat
	}
	counts.Intent = attempt + 1
	if err := r.state.SetGate1Counts(r.ctx, r.conv, counts); err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	r.rec.Gate = api.Gate{Kind: api.GateIntentUndetermined, UserMessage: msg,
		NextIntentAttempt: &api.NextIntentAttempt{Attempt: ptr(attempt + 1)}, Diag: diag}
	return r.ask(api.Question{SlotID: slot, Kind: api.QuestionRestateIntent, Message: msg}, QuestionBinding{})
}

func (r *run) toolUndetermined(c2, reason string) error {
	counts, err := r.state.Gate1Counts(r.ctx, r.conv)
	if err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	attempt := max(counts.Tool, r.req.ToolAttempt, 0)
	diag := map[string]any{"candidate_tool": r.req.Tool, "user_action": c2, "reason": reason,
		"attempt": attempt, "limit": api.ToolAskLimit}
	if r.rec.Outcome = askOutcome(attempt >= api.ToolAskLimit); r.rec.Outcome == api.OutcomeExhausted {
		r.rec.Gate = api.Gate{Kind: api.GateToolUndeterminedExhausted, UserMessage: msgToolExhausted,
			NextToolAttempt: &api.NextToolAttempt{}, Diag: diag}
		return nil
	}
	counts.Tool = attempt + 1
	if err := r.state.SetGate1Counts(r.ctx, r.conv, counts); err != nil {
		return fmt.Errorf("gates: ask counters: %w", err)
	}
	r.rec.Gate = api.Gate{Kind: api.GateToolUndetermined, UserMessage: msgTool,
		NextToolAttempt: &api.NextToolAttempt{Attempt: ptr(attempt + 1)}, Diag: diag}
	return r.ask(api.Question{SlotID: api.C3SlotID, Kind: api.QuestionRestateAction, Message: msgTool},
		QuestionBinding{ActionKey: r.actionKey})
}

// ask issues a question id bound to the action key and slot, and appends the question.
func (r *run) ask(q api.Question, b QuestionBinding) error {
	id, err := r.e.ids.NewID("q")
	if err != nil {
		return err
	}
	q.QuestionID = id
	b.Principal = r.req.Principal
	b.SlotID = q.SlotID
	b.Kind = q.Kind
	if err := r.state.SaveQuestion(r.ctx, id, b); err != nil {
		return fmt.Errorf("gates: save question: %w", err)
	}
	r.rec.Questions = append(r.rec.Questions, q)
	return nil
}

// safeMessage keeps the tool name out of anything shown to the user.
func (r *run) safeMessage(msg string) string {
	if t := strings.ToLower(r.req.Tool); t != "" && strings.Contains(strings.ToLower(msg), t) {
		return msgGenericValue
	}
	return msg
}

var printer = message.NewPrinter(language.English)

// validationDetail is the innermost reason a value failed its schema, without schema URLs.
func validationDetail(err error) (string, []string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error(), nil
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve.ErrorKind.LocalizedString(printer), ve.InstanceLocation
}

// digestArgs is the canonical digest of an argument object.
func digestArgs(args map[string]any) (string, error) {
	d, err := canonical.Digest(args)
	if err != nil {
		return "", fmt.Errorf("gates: arguments digest: %w", err)
	}
	return d, nil
}
