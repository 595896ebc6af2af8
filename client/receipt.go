package client

import (
	"context"
	"encoding/json"

	"github.com/verdictgate/verdict/api"
)

// PostReceipt posts an execution receipt (a compact JWS, as an executed answer carries it) to
// verdictd (POST /v1/receipts) and returns what verdictd made of it. A refused receipt is an
// *Error. Posting the same receipt again is harmless: verdictd answers as before.
func (c *Client) PostReceipt(ctx context.Context, receipt string) (*api.ReceiptResult, error) {
	return post[api.ReceiptResult](ctx, c, "/v1/receipts", map[string]string{"receipt": receipt}, json.Unmarshal, "receipt: undecodable answer")
}
