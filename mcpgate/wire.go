package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/verdictgate/verdict/api/apijson"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"net/http"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
)

// What observe mode counts, beside the outcomes, for a call it could not preflight: one whose
// request could not be built, and one verdictd did not answer.
const (
	outcomeInvalidRequest = "invalid_request"
	outcomePreflightError = "preflight_error"
)

// APIError is a non-2xx answer of verdictd or the executor.
type APIError struct {
	Service string // "verdictd" or "executor"
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Service, e.Status, e.Code, e.Message)
}

// maxAnswerBytes bounds what the gateway reads from either service.
const maxAnswerBytes = 8 << 20

// client posts JSON to one service.
type client struct {
	service string
	base    string
	token   string
	http    *http.Client
}

// post sends body to path and returns the status and the answer bytes. A
// transport failure is an error; an HTTP status is data.
func (c *client) post(ctx context.Context, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: encode request: %w", c.service, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.base, "/")+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", c.service, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	// The call's trace context goes on to verdictd and the executor.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", c.service, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s: read answer: %w", c.service, err)
	}
	if len(out) > maxAnswerBytes {
		return resp.StatusCode, nil, fmt.Errorf("%s: answer larger than %d bytes", c.service, maxAnswerBytes)
	}
	return resp.StatusCode, out, nil
}

func (c *client) apiError(status int, body []byte) *APIError {
	e := httpx.ReadError(status, body)
	if e.Code == "" {
		e.Code = httpx.CodeInternal
	}
	return &APIError{Service: c.service, Status: status, Code: e.Code, Message: e.Message}
}

// preflight runs one preflight. Any answer but 200 with a record is an
// error: nothing may proceed on it.
func (c *client) preflight(ctx context.Context, req *api.Request) (*api.Record, error) {
	status, body, err := c.post(ctx, "/v1/preflight", req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, c.apiError(status, body)
	}
	var rec api.Record
	if err := apijson.Unmarshal(body, &rec); err != nil {
		return nil, fmt.Errorf("verdictd: undecodable record: %w", err)
	}
	if rec.Outcome == "" {
		return nil, errors.New("verdictd: record without an outcome")
	}
	return &rec, nil
}

// execution is the executor's answer to POST /v1/execute, as far as the
// gateway reads it.
type execution struct {
	Status    int
	Decision  string          // execution.execution_decision
	Reason    string          // execution.reason, or the error code of a refusal
	RecordID  string          // execution.record_id
	Result    json.RawMessage // the MCP CallToolResult, when the tool answered
	ErrorCode string
}

func (c *client) execute(ctx context.Context, verdict string, args json.RawMessage) (*execution, error) {
	status, body, err := c.post(ctx, "/v1/execute", api.ExecuteRequest{Verdict: verdict, Arguments: args})
	if err != nil {
		return nil, err
	}
	var ans api.ExecuteAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("executor: HTTP %d, undecodable answer: %w", status, err)
	}
	x := &execution{Status: status, Result: ans.Result}
	if e := ans.Execution; e != nil {
		x.Decision, x.RecordID = string(e.Decision), e.RecordID
		if e.Reason != nil {
			x.Reason = *e.Reason
		}
	}
	if ans.Error != nil {
		x.ErrorCode = ans.Error.Code
		if x.Reason == "" {
			x.Reason = ans.Error.Code
		}
	}
	return x, nil
}
