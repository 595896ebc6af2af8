package gates

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
)

// Limits bound what a request may contain.
type Limits struct {
	MaxBytes    int // 0 = 1 MiB
	MaxSegments int // 0 = 512
	MaxDepth    int // 0 = 64

	// The user checklist a request carries is bounded three ways: its items, the text of one
	// expression, and the text of all of them together. Every expression is compiled before
	// anything is evaluated, and compiling is work no evaluation cost limit covers: a few
	// microseconds per byte of plain text, tens per byte of nested literals.
	MaxChecklistItems int // 0 = 64
	MaxExprBytes      int // 0 = policy.MaxExprBytes (4 KiB), also the most it may be
	MaxChecklistBytes int // 0 = 8 KiB
}

// DefaultLimits are the documented defaults (docs/operations.md), and this implementation's for the user checklist.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 1 << 20, MaxSegments: 512, MaxDepth: 64,
		MaxChecklistItems: 64, MaxExprBytes: policy.MaxExprBytes, MaxChecklistBytes: 8 << 10}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxExprBytes > policy.MaxExprBytes {
		// The compiler refuses anything longer: a larger limit would only move the refusal
		// from the request to its item.
		l.MaxExprBytes = d.MaxExprBytes
	}
	for _, f := range [...][2]*int{ // a limit, and its default
		{&l.MaxBytes, &d.MaxBytes}, {&l.MaxSegments, &d.MaxSegments}, {&l.MaxDepth, &d.MaxDepth},
		{&l.MaxChecklistItems, &d.MaxChecklistItems}, {&l.MaxExprBytes, &d.MaxExprBytes},
		{&l.MaxChecklistBytes, &d.MaxChecklistBytes},
	} {
		if *f[0] <= 0 {
			*f[0] = *f[1]
		}
	}
	return l
}

// RequestError is a 400-class rejection of a request, with a stable code.
type RequestError struct {
	Code string
	Msg  string
}

func (e *RequestError) Error() string { return "preflight request: " + e.Code + ": " + e.Msg }

func badRequest(code, format string, args ...any) *RequestError {
	return &RequestError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// DecodeRequest decodes and checks a preflight request body. Unknown fields, inexact numbers,
// duplicate keys, excess nesting or segments and shape errors are a *RequestError. Locations
// that point nowhere are not errors: they become rejected candidates during the run.
func DecodeRequest(data []byte, lim Limits) (*api.Request, error) {
	lim = lim.withDefaults()
	var r api.Request
	if err := DecodeStrict(data, lim, &r); err != nil {
		return nil, err
	}
	if err := CheckRequest(&r, lim); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeStrict reads a request body of any shape built from this package's request types (a
// whole request, or a trigger's answers and pre-set data) into v, as DecodeRequest reads one:
// the body's size and nesting within lim, numbers exact, no duplicate, unknown or misspelt
// member. Every refusal is a *RequestError.
func DecodeStrict(data []byte, lim Limits, v any) error {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return badRequest(api.CodeTooLarge, "body exceeds %d bytes", lim.MaxBytes)
	}
	if err := (canonical.Options{MaxDepth: lim.MaxDepth}).Validate(data); err != nil {
		if ce, ok := errors.AsType[*canonical.Error](err); ok {
			return &RequestError{Code: ce.Code, Msg: ce.Msg}
		}
		return badRequest(api.CodeInvalidRequest, "%v", err)
	}
	if err := apijson.UnmarshalStrict(data, v); err != nil {
		code := api.CodeInvalidRequest
		if errors.Is(err, apijson.ErrUnknownMember) {
			code = api.CodeUnknownField
		}
		return badRequest(code, "%v", err)
	}
	return nil
}

// CheckRequest applies the rules of a request's meaning that its shape does not carry: lengths,
// phases, locations that come in pairs, and the bounds of the user checklist. DecodeRequest
// applies it; a caller that builds a request itself (a trigger expanded from its deferred
// record) applies it before running the request. The first rule broken is the answer.
func CheckRequest(r *api.Request, lim Limits) error {
	lim = lim.withDefaults()
	for _, check := range [...]func(*api.Request, Limits) error{checkNames, checkPhase, checkAnswers, checkChecklist, checkPresets} {
		if err := check(r, lim); err != nil {
			return err
		}
	}
	return nil
}

// checkNames checks the lengths of the names a request carries, the characters an action key
// forbids in them, and the number of the instruction's segments.
func checkNames(r *api.Request, lim Limits) error {
	switch {
	case r.Principal == "" || len(r.Principal) > 256:
		return badRequest(api.CodeInvalidRequest, "principal must be 1 to 256 bytes")
	case len(r.ConversationID) > 256:
		return badRequest(api.CodeInvalidRequest, "conversation_id exceeds 256 bytes")
	case r.Server == "" || len(r.Server) > 128:
		return badRequest(api.CodeInvalidRequest, "server must be 1 to 128 bytes")
	case r.Tool == "" || len(r.Tool) > 128:
		return badRequest(api.CodeInvalidRequest, "tool must be 1 to 128 bytes")
	// An action key is principal:action:server/tool, the action normalized to letters, digits
	// and spaces: with no ':' or '/' in the server and no ':' in the tool, one key names one
	// (principal, action, server, tool) and no two principals' counters, intents or prior
	// values can meet under it.
	case strings.ContainsAny(r.Server, ":/"):
		return badRequest(api.CodeInvalidRequest, "server must not contain ':' or '/'")
	case strings.Contains(r.Tool, ":"):
		return badRequest(api.CodeInvalidRequest, "tool must not contain ':'")
	case len(r.Instruction.Segments) > lim.MaxSegments:
		return badRequest(api.CodeTooManySegments, "instruction has %d segments, limit %d", len(r.Instruction.Segments), lim.MaxSegments)
	}
	return nil
}

// checkPhase checks the phase, and that a trigger names the action it reruns.
func checkPhase(r *api.Request, _ Limits) error {
	if r.Phase == nil {
		return nil
	}
	switch *r.Phase {
	case api.PhaseAtInstruction:
	case api.PhaseAtTrigger:
		if r.ActionKey == nil || *r.ActionKey == "" {
			return badRequest(api.CodeInvalidRequest, "an at_trigger request must name its action_key")
		}
	default:
		return badRequest(api.CodeInvalidRequest, "phase must be null, at_instruction or at_trigger")
	}
	return nil
}

// checkAnswers checks that each candidate names its field and each answer its question, with
// a location given whole.
func checkAnswers(r *api.Request, _ Limits) error {
	for i, c := range r.Candidates {
		if c.Field == "" {
			return badRequest(api.CodeInvalidRequest, "candidates[%d].field is empty", i)
		}
	}
	for i, a := range r.UserAnswers {
		if a.QuestionID == "" {
			return badRequest(api.CodeInvalidRequest, "user_answers[%d].question_id is required", i)
		}
		if (a.Segment == nil) != (a.Span == nil) {
			return badRequest(api.CodeInvalidRequest, "user_answers[%d]: segment and span come together", i)
		}
	}
	return nil
}

// checkChecklist checks the user checklist's kinds and its bounds: items, each expression's
// bytes and all of them together.
func checkChecklist(r *api.Request, lim Limits) error {
	if n := len(r.UserChecklist); n > lim.MaxChecklistItems {
		return badRequest(api.CodeTooManyChecklistItems, "user_checklist has %d items, limit %d", n, lim.MaxChecklistItems)
	}
	exprBytes := 0
	for i, it := range r.UserChecklist {
		if it.Kind != "" && it.Kind != "expr" && it.Kind != "confirm" {
			return badRequest(api.CodeInvalidRequest, "user_checklist[%d].kind must be expr or confirm", i)
		}
		if len(it.Expr) > lim.MaxExprBytes {
			return badRequest(api.CodeExpressionTooLarge, "user_checklist[%d].expr is %d bytes, limit %d", i, len(it.Expr), lim.MaxExprBytes)
		}
		exprBytes += len(it.Expr)
	}
	if exprBytes > lim.MaxChecklistBytes {
		return badRequest(api.CodeChecklistTooLarge, "user_checklist expressions total %d bytes, limit %d", exprBytes, lim.MaxChecklistBytes)
	}
	return nil
}

// checkPresets checks that every pre-set value comes with its trust.
func checkPresets(r *api.Request, _ Limits) error {
	if p := intentPreset(r); p != nil && (p.Trust == "" || !p.Value.Set) {
		return badRequest(api.CodeInvalidRequest, "intent.action_name_preset needs value and trust")
	}
	// The first bad key in sorted order is named, so that one body always gets one answer.
	bad, found := "", false
	for k, p := range r.PreSetData {
		if (p.Trust == "" || !p.Value.Set) && (!found || k < bad) {
			bad, found = k, true
		}
	}
	if found {
		return badRequest(api.CodeInvalidRequest, "pre_set_data[%q] needs value and trust", bad)
	}
	return nil
}

func intentPreset(r *api.Request) *api.PreSet {
	if r.Intent == nil {
		return nil
	}
	return r.Intent.ActionNamePreset
}
