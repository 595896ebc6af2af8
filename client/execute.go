package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/verdictgate/verdict/api"
)

// Execute presents a verdict and the exact arguments it binds to the executor (POST
// /v1/execute). On 200 the tool ran and answered: the answer holds the execution record, the
// tool's CallToolResult and the receipt. Any other status is an *Error, returned beside the
// answer when the executor sent one: a refusal, a failure (502, with the tool's result when it
// answered) and an unknown outcome (504) each have an execution record to show. A nil answer
// with an error means nothing is known of the call's fate but what the executor's records say.
func (c *Client) Execute(ctx context.Context, verdict string, arguments json.RawMessage) (*api.ExecuteAnswer, error) {
	status, body, err := c.postJSON(ctx, "/v1/execute", api.ExecuteRequest{Verdict: verdict, Arguments: arguments})
	if err != nil {
		return nil, err
	}
	var ans api.ExecuteAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		if status != http.StatusOK {
			return nil, refusal(status, body)
		}
		return nil, fmt.Errorf("client: execute: HTTP %d, undecodable answer: %w", status, err)
	}
	if status == http.StatusOK {
		return &ans, nil
	}
	e := &Error{Status: status}
	if ans.Error != nil {
		e.Code, e.Message = ans.Error.Code, ans.Error.Message
	}
	return &ans, e
}

// Read runs a pass-through call of a tool of a server the executor calls with each user's own
// authority, for the user whose token comes with ctx (POST /v1/read, with the caller token):
// the tool's result, or the refusal (*Error, ConnectURL set when the user must connect an
// account).
func (c *Client) Read(ctx context.Context, server, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	status, body, err := c.postJSON(ctx, "/v1/read", api.ReadRequest{Server: server, Tool: tool, Arguments: arguments})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, refusal(status, body)
	}
	var ans api.ReadAnswer
	if err := json.Unmarshal(body, &ans); err != nil || len(ans.Result) == 0 {
		return nil, fmt.Errorf("client: read: undecodable answer: %v", err)
	}
	return ans.Result, nil
}
