package askform

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
)

// ErrNotApproved: the user accepted the form but did not approve what it
// asked them to approve.
var ErrNotApproved = errors.New("not approved")

// Answers is what the user said in a form.
type Answers struct {
	// User are the answers to the record's questions, in the form's order,
	// as the next preflight's user_answers carry them.
	User []api.Answer
	// WhenCase is the timing the user picked, or "" when none was picked
	// (the last one picked, should the form ask twice).
	WhenCase string
	// Restatements are the action restated in the user's own words, each
	// trimmed, in the form's order: typed by the user into a form the host
	// rendered, each is the user's own instruction, and the action name is
	// the last.
	Restatements []string
}

// Answers reads the user's answers to f from the content of an accepted
// elicitation. A value missing from content stays unanswered (verdictd asks
// again); an approval or a review that is missing or not given is
// ErrNotApproved, and a number that cannot be sent exactly an error: either
// way nothing the user said counts.
func (f *Form) Answers(content map[string]any) (Answers, error) {
	var a Answers
	// The new-value fields a prior-value choice answers itself.
	handled := map[string]bool{}
	for _, fl := range f.fields {
		v, ok := content[fl.Key]
		if handled[fl.Key] {
			continue
		}
		switch fl.Kind {
		case fieldReview:
			if s, _ := v.(string); s != choiceApprove {
				return Answers{}, ErrNotApproved
			}
			a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Approved: new(true), Value: rawValue(fl.Value)})
		case fieldPrior:
			handled[fl.NewKey] = true
			s, _ := v.(string)
			nv, hasNew := content[fl.NewKey]
			hasNew = hasNew && nv != nil && nv != ""
			switch {
			case s == choiceKeep && !hasNew:
				// An approval of exactly the value this form showed.
				a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Approved: new(true), Value: rawValue(fl.Value)})
			case s == choiceChange && hasNew:
				raw, err := answerJSON(nv)
				if err != nil {
					return Answers{}, fmt.Errorf("answer %s: %w", fl.NewKey, err)
				}
				a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
			}
			// Anything else (no choice, a change without a value, keep with a
			// new value beside it) is not clear: the question stays open and
			// verdictd asks it again.
		case fieldApproval:
			if b, isBool := v.(bool); !ok || !isBool || !b {
				return Answers{}, ErrNotApproved
			}
			a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Approved: new(true), Value: rawValue(fl.Value)})
		case fieldValue:
			if !ok || v == nil {
				continue
			}
			raw, err := answerJSON(v)
			if err != nil {
				return Answers{}, fmt.Errorf("answer %s: %w", fl.Key, err)
			}
			a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
		case fieldBranch:
			s, _ := v.(string)
			i := slices.Index(fl.Labels, s)
			if i < 0 {
				continue
			}
			raw, err := json.Marshal(fl.Options[i])
			if err != nil {
				return Answers{}, err
			}
			a.User = append(a.User, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
		case fieldWhenCase:
			if s, _ := v.(string); slices.Contains(policy.WhenCases(), s) {
				a.WhenCase = s
			}
		case fieldRestatement:
			s, _ := v.(string)
			s = strings.TrimSpace(s)
			if s == "" || utf8.RuneCountInString(s) > maxRestatement {
				continue
			}
			a.Restatements = append(a.Restatements, s)
		}
	}
	return a, nil
}

// answerJSON encodes an answer exactly. Form answers arrive as float64: an
// integral value within the exact range is written as an integer, and one
// outside it is refused rather than rounded. 2^53 itself is outside: it is
// also what 2^53+1 decodes to, so it may not be what the user typed.
func answerJSON(v any) (json.RawMessage, error) {
	if f, ok := v.(float64); ok {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errors.New("not a finite number")
		}
		if f == math.Trunc(f) {
			if math.Abs(f) >= 1<<53 {
				return nil, errors.New("integer too large to be exact")
			}
			return json.RawMessage(strconv.FormatInt(int64(f), 10)), nil
		}
	}
	return json.Marshal(v)
}

// rawValue is an answer's value as the gateway holds it, raw JSON: none when it is empty.
func rawValue(raw json.RawMessage) api.Value {
	if len(raw) == 0 {
		return api.Value{}
	}
	return api.Value{Set: true, V: raw}
}
