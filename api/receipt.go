package api

// ReceiptResult is verdictd's answer to an accepted receipt (POST /v1/receipts).
type ReceiptResult struct {
	Accepted  bool   `json:"accepted"`
	VerdictID string `json:"verdict_id"`
	RecordID  string `json:"record_id"`
	Decision  string `json:"decision"`
	// PriorState reports whether the call's values are the action key's executed baseline
	// after this receipt (only an executed call's can be): true when this receipt made them so
	// or an earlier post of it already had.
	PriorState bool `json:"prior_state"`
	// Baseline says what an executed receipt did to the baseline: applied, already_applied
	// (posted before: nothing changed) or superseded (a newer execution is the baseline and
	// stays). Absent for a call that did not execute.
	Baseline string `json:"baseline,omitempty"`
}
