package gates

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/visible"
)

// draftedSources are the sources a drafted field's slot lists: the user's review of the draft,
// or, when the model proposed none, the user's own answer.
var draftedSources = [...]api.Source{api.SourceReviewedDraft, api.SourceUserAnswer}

// draft is a drafted field's proposed value, frozen by the canonical digest of its JSON value.
type draft struct {
	value any
	ref   api.DraftRef
	// concealed counts the characters of the draft a person would not see (visible.Concealed)
	// when its field's policy does not allow them, first being the first of them: such a
	// draft is never shown for review, since what the user approves is what they see.
	concealed int
	first     rune
}

// probeDraft settles a drafted field. Its value is the model's proposal, and it becomes known
// only by an approval bound to exactly that proposal: no other source is consulted, because a
// draft is the model's text by design and grounding it in the user's words would prove nothing.
// The draft is never a segment of the instruction, so it grounds no other field.
//
// A user answer to the value question (asked only when the model proposed no draft, or
// proposals that disagree) settles it first, as the user's own words.
func (r *run) probeDraft(name string, res *resolution) {
	if a, ok := r.answers[name]; ok {
		res.known, res.value, res.source, res.origin = true, a.value, api.SourceUserAnswer, a.origin
		return
	}
	var value any
	n := 0
	i, ok := r.candidates.first[name]
	for ; ok && i >= 0; i = r.candidates.next[i] {
		c := &r.req.Candidates[i]
		if n > 0 && !sameJSON(c.Value, value) {
			res.note = "drafts disagree"
			return
		}
		value = c.Value
		n++
	}
	if n == 0 {
		res.note = "no draft proposed"
		return
	}
	res.proposed = true
	b, err := canonical.Marshal(value)
	if err != nil {
		// A value without one canonical form cannot be bound to a digest: it is not a draft
		// the user can approve.
		res.note = "draft has no canonical form: " + err.Error()
		return
	}
	sum := sha256.Sum256(b)
	d := "sha256:" + hex.EncodeToString(sum[:]) // canonical.Digest of value, from the bytes at hand
	res.draft = &draft{value: value, ref: api.DraftRef{Digest: d, Bytes: len(b)}}
	if f := r.ptool.Field(name); f == nil || !f.AllowHiddenCharacters {
		if res.draft.concealed, res.draft.first = concealedIn(value); res.draft.concealed > 0 {
			// Neither asked nor settled, not even by an approval given before: valueSlot
			// refuses the call on it (draft_hidden_characters).
			return
		}
	}
	a, ok := r.reviewed[name]
	switch {
	case !ok || !a.approved:
	case a.digest == d:
		res.known, res.value = true, value
		res.source, res.origin = api.SourceReviewedDraft, api.SourceReviewedDraft
	default:
		// The draft changed since the user approved it: that approval is not of this draft.
		r.rec.RejectedAnswers = append(r.rec.RejectedAnswers,
			api.RejectedAns{QuestionID: a.questionID, SlotID: name, Reason: api.AnswerApprovalValueMismatch})
	}
}

// concealedIn counts what visible.Concealed finds in every string of the JSON value v, object
// member names included, and returns the first rune it found.
func concealedIn(v any) (n int, first rune) {
	add := func(s string) {
		k, f := visible.Concealed(s)
		if n == 0 && k > 0 {
			first = f
		}
		n += k
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			add(t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				add(k)
				walk(t[k])
			}
		}
	}
	walk(v)
	return n, first
}

// concealedUnmet is the unmet item of a drafted field whose draft holds characters a person
// would not see.
func concealedUnmet(name string, d *draft) api.Unmet {
	return api.Unmet{SlotID: name, Reason: api.UnmetDraftHiddenCharacters,
		Detail: fmt.Sprintf("the draft holds %d character(s) a person does not see, the first U+%04X; "+
			"it is not shown for review", d.concealed, d.first)}
}

// reviewQuestion is the question that shows a draft in full for approval. The answer is an
// approval of exactly the value shown ({"question_id", "approved": true, "value": <the draft>}).
func (r *run) reviewQuestion(p *slotPlan, name string, d *draft) {
	p.question = api.Question{SlotID: name, Kind: api.QuestionReviewDraft,
		Message: r.safeMessage(askReview(r.ptool.Field(name), r.def.props[name], name)),
		Schema:  []byte(`{"const":true}`), Shown: d.value, Value: d.value, Draft: &d.ref}
	p.binding = QuestionBinding{ActionKey: r.actionKey, Value: d.value, Shown: d.value}
}

// readReview reads an answer to a review_draft question: an approval counts only when it echoes
// exactly the draft the question showed, and then stands for that draft's digest.
func (r *run) readReview(a api.Answer, b QuestionBinding) (reviewAnswer, string) {
	approved := a.Approved != nil && *a.Approved
	if !approved {
		return reviewAnswer{questionID: a.QuestionID}, ""
	}
	if !a.Value.Set || !sameJSON(a.Value.V, b.Value) {
		return reviewAnswer{}, api.AnswerApprovalValueMismatch
	}
	d, err := canonical.Digest(b.Value)
	if err != nil {
		return reviewAnswer{}, api.AnswerApprovalValueMismatch
	}
	return reviewAnswer{questionID: a.QuestionID, approved: true, digest: d}, ""
}

// reviewAnswer is the user's review of one draft: approved for the draft of digest.
type reviewAnswer struct {
	questionID string
	approved   bool
	digest     string
}
