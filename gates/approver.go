package gates

import (
	"context"

	"github.com/verdictgate/verdict/policy"
)

// ApprovalRequest is what a C3 approver judges: does this tool produce the state change the
// user named?
type ApprovalRequest struct {
	Principal      string
	Server         string
	Tool           string
	UserActionName string // raw C2 text
	Normalized     string // C2 after Normalize
	Policy         *policy.Tool
}

// Approval is an approver's answer. Only Approved == true passes.
type Approval struct {
	Approved bool
	By       string
	Reason   string
}

// Approver decides C3. An error, a timeout or anything malformed is not an approval.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// PhraseApprover approves when the normalized C2 equals one of the tool's normalized action
// phrases in the policy.
type PhraseApprover struct{}

// Approve implements Approver.
func (PhraseApprover) Approve(_ context.Context, req ApprovalRequest) (Approval, error) {
	if req.Policy == nil {
		return Approval{Reason: "tool has no policy entry"}, nil
	}
	for _, a := range req.Policy.Actions {
		if Normalize(a) == req.Normalized && req.Normalized != "" {
			return Approval{Approved: true, By: "policy"}, nil
		}
	}
	return Approval{Reason: "no action phrase matches"}, nil
}
