package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/verdictgate/verdict/api"
)

// PostReceipt posts an execution receipt (a compact JWS, as an executed answer carries it) to
// verdictd (POST /v1/receipts) and returns what verdictd made of it. A refused receipt is an
// *Error. Posting the same receipt again is harmless: verdictd answers as before.
func (c *Client) PostReceipt(ctx context.Context, receipt string) (*api.ReceiptResult, error) {
	status, body, err := c.postJSON(ctx, "/v1/receipts", map[string]string{"receipt": receipt})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, refusal(status, body)
	}
	var res api.ReceiptResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("client: receipt: undecodable answer: %w", err)
	}
	return &res, nil
}
