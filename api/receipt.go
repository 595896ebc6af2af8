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

// MaxReceiptBatch is the most receipts one POST /v1/receipts/batch may carry.
const MaxReceiptBatch = 64

// ReceiptBatch is the body of POST /v1/receipts/batch: receipts an executor delivers together,
// each a compact receipt JWS.
type ReceiptBatch struct {
	Receipts []string `json:"receipts"`
}

// ReceiptBatchResult answers a batch: one item per receipt, in the batch's order.
type ReceiptBatchResult struct {
	Results []ReceiptItem `json:"results"`
}

// ReceiptItem is what one receipt of a batch got: the status, and the answer or the error, that
// POST /v1/receipts would have given it alone.
type ReceiptItem struct {
	Status int            `json:"status"`
	Result *ReceiptResult `json:"result,omitempty"`
	Error  *ErrorDetail   `json:"error,omitempty"`
}
