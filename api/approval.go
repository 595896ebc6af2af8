package api

// Out-of-band approvals (docs/approvals.md): one pending gated call whose approvals its
// tool's policy lets an approver give in the console, bound to the call's arguments digest.

// Approval states. A pending approval past its expires_at reads as expired; an approved one
// not used by its use_by, or whose policy version, tool pin or tool definition changed since it
// was created, reads as lapsed.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalLapsed   = "lapsed"
)

// Decisions an approver may POST.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// DecidedByWebhook is the decided_by of a decision given by the tool's approval webhook. An
// approver's id is "<issuer>#<sub>", never this.
const DecidedByWebhook = "webhook"

// MaxDecisionReason bounds the reason a webhook may give with its decision, in bytes.
const MaxDecisionReason = 1024

// Codes of the approvals API's refusals (the error envelope's code), and the reasons a
// refused approval gives on a decision record and in an approver's GET (Approval.Refusal).
const (
	CodeUnauthorized          = "unauthorized"
	CodeSelfApproval          = "self_approval"
	CodeApproverNotInGroup    = "approver_not_in_group"
	CodeChannelNotAllowed     = "channel_not_allowed"
	CodeNotFound              = "not_found"
	CodeAlreadyDecided        = "already_decided"
	CodeApprovalValueMismatch = "approval_value_mismatch"
	CodeApprovalExpired       = "approval_expired"
	// CodeApprovalLapsed is the reason of a record that ended refuse on an approval that
	// lapsed: approved, but not used by its use_by, or no longer of the policy version, tool
	// pin or tool definition it was created under.
	CodeApprovalLapsed = "approval_lapsed"
	// CodeApprovalDenied is the reason of a record that ended refuse on a denial.
	CodeApprovalDenied = "approval_denied"
)

// Approval is one pending (or decided) gated call as the approvals API shows it.
type Approval struct {
	ApprovalID      string          `json:"approval_id"`
	State           string          `json:"state"`
	RecordID        string          `json:"record_id"`
	Principal       string          `json:"principal"`
	ConversationID  string          `json:"conversation_id,omitempty"`
	Server          string          `json:"server"`
	Tool            string          `json:"tool"`
	Arguments       map[string]any  `json:"arguments"`
	ArgumentsDigest string          `json:"arguments_digest"`
	Slots           []ApprovalSlot  `json:"slots"`
	Drafts          []ApprovalDraft `json:"drafts"`
	Notices         []string        `json:"notices"`
	FourEyes        bool            `json:"four_eyes"`
	Group           string          `json:"group,omitempty"`
	CreatedAt       string          `json:"created_at"`
	ExpiresAt       string          `json:"expires_at"`
	DecidedBy       string          `json:"decided_by,omitempty"`
	DecidedAt       string          `json:"decided_at,omitempty"`
	// UseBy is, on an approved approval, when it lapses if no preflight has used it:
	// decided_at plus the rule's use_within.
	UseBy string `json:"use_by,omitempty"`
	// WebhookHost and DecisionReason are set on a decision given by the webhook
	// (DecidedBy DecidedByWebhook): the host of the URL that answered, and the reason it gave.
	WebhookHost    string `json:"webhook_host,omitempty"`
	DecisionReason string `json:"decision_reason,omitempty"`
	// UsedBy is the decision record of the preflight that acted on the decision (issued the
	// verdict, or refused the call): a decision counts for one preflight only.
	UsedBy string `json:"used_by,omitempty"`
	// MayDecide and Refusal tell an approver's GET what a POST would answer; a caller's GET
	// (read-only) gets may_decide false and no refusal.
	MayDecide bool   `json:"may_decide"`
	Refusal   string `json:"refusal,omitempty"`
}

// ApprovalSlot is one approval slot the decision settles: its question and the value it
// approves.
type ApprovalSlot struct {
	SlotID   string `json:"slot_id"`
	Question string `json:"question"`
	Value    any    `json:"value,omitzero"`
}

// ApprovalDraft is a drafted field of the call, in full, with its digest and size.
type ApprovalDraft struct {
	Field  string `json:"field"`
	Text   any    `json:"text"`
	Digest string `json:"digest"`
	Bytes  int    `json:"bytes"`
}

// ApprovalList is the answer of GET /v1/approvals.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// DecisionRequest is the body of POST /v1/approvals/{approval_id}.
type DecisionRequest struct {
	Decision        string `json:"decision"`
	ArgumentsDigest string `json:"arguments_digest"`
}

// RecordApproval is, on a decision record, the console approval of the call: the pending one
// an ask_user record created or found (its id, state and expiry), or the decision a record
// acted on. ArgumentsDigest is the digest the approval binds.
type RecordApproval struct {
	ApprovalID      string   `json:"approval_id,omitempty"`
	State           string   `json:"state,omitempty"`
	Channels        []string `json:"channels"`
	ArgumentsDigest string   `json:"arguments_digest"`
	ExpiresAt       string   `json:"expires_at,omitempty"`
	DecidedBy       string   `json:"decided_by,omitempty"`
	// Arguments are the call's arguments, for verdictd to store with a new approval; never
	// written (the approval shows them, and only to the approvals API's callers).
	Arguments map[string]any `json:"-"`
}

// WebhookDecision is what an approval webhook answers to the approval verdictd posts to it:
// approve or deny, the arguments digest of the approval it decides, and an optional reason.
type WebhookDecision struct {
	Decision        string `json:"decision"`
	ArgumentsDigest string `json:"arguments_digest"`
	Reason          string `json:"reason,omitempty"`
}
