package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
)

// ErrNoOutcome: verdictd answered 200 with a record that decides nothing. Nothing may proceed
// on it.
var ErrNoOutcome = errors.New("record without an outcome")

// Preflight runs one preflight (POST /v1/preflight) and returns its decision record. Any answer
// but 200 with a record that has an outcome is an error: a refusal is an *Error. Only a record
// whose Outcome is api.OutcomeVerdictIssued carries a verdict.
func (c *Client) Preflight(ctx context.Context, req *api.Request) (*api.Record, error) {
	rec, err := post[api.Record](ctx, c, "/v1/preflight", req, apijson.Unmarshal, "preflight: undecodable record")
	if err != nil {
		return nil, err
	}
	if rec.Outcome == "" {
		return nil, fmt.Errorf("client: preflight: %w", ErrNoOutcome)
	}
	return rec, nil
}

// Answer runs the preflight of req again with the user's answers to the questions of an
// earlier record (their question_ids); req itself is not changed. An answer that counted for
// nothing is in the new record's RejectedAnswers.
func (c *Client) Answer(ctx context.Context, req *api.Request, answers ...api.Answer) (*api.Record, error) {
	r := *req
	r.UserAnswers = answers
	return c.Preflight(ctx, &r)
}
