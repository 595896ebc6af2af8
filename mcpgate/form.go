package mcpgate

import (
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/askform"
)

// declined is the answer to a form the user declined or cancelled. A
// form that asks for approval is the user's refusal of the request; one
// that asks only for details leaves them missing.
func declined(f *askform.Form) *mcp.CallToolResult {
	if f.AsksApproval() {
		return toolError(api.ReasonDeclined, "You did not approve the request."+nothingDone)
	}
	return toolError(api.ReasonDeclined, "You did not provide the details needed."+nothingDone)
}

// answer adds the user's answers to s.Form to the request: the answers to
// verdictd's questions after those of earlier rounds, the timing picked,
// and each restatement as an instruction segment of the user's own. An
// error (an approval or a review not given, a number that cannot be sent
// exactly) adds nothing, and ends the call.
func (s *callState) answer(content map[string]any) error {
	a, err := s.Form.Answers(content)
	if err != nil {
		return err
	}
	s.Req.UserAnswers = append(s.Req.UserAnswers, a.User...)
	if a.WhenCase != "" {
		s.setWhenCase(a.WhenCase)
	}
	for _, text := range a.Restatements {
		// Typed by the user into a form the host rendered: it is the
		// user's own words, and the action name points at all of it.
		segs := append(s.Req.Instruction.Segments, api.Segment{Text: text, Trust: "user", Origin: "mcpgate:elicitation"})
		s.Req.Instruction.Segments = segs
		s.intent().ActionName = &api.Location{Segment: len(segs) - 1, Span: api.Span{0, utf8.RuneCountInString(text)}}
	}
	return nil
}
