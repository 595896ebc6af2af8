package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
)

// The approvals API (docs/approvals.md) authenticates with the Client's token (WithToken): a
// caller token reads the approvals of the principals it acts for (with WithSubjectToken on the
// context, of the user whose token it forwards); an approver's own access token, issued for
// verdictd's approvals resource, reads every approval and decides.

// Approvals lists approvals (GET /v1/approvals), newest first, at most 200; state, when not
// empty, keeps those in it (api.ApprovalPending, …).
func (c *Client) Approvals(ctx context.Context, state string) ([]api.Approval, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	var out api.ApprovalList
	if err := c.getJSON(ctx, "/v1/approvals", q, &out); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// Approval reads one approval (GET /v1/approvals/{id}). With wait above zero (at most a
// minute) a pending approval is answered when it is decided or expires, or when wait ends,
// whichever comes first; the Client's HTTP client must allow that long.
func (c *Client) Approval(ctx context.Context, id string, wait time.Duration) (*api.Approval, error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out api.Approval
	if err := c.getJSON(ctx, "/v1/approvals/"+url.PathEscape(id), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decide approves or denies one approval (POST /v1/approvals/{id}) for the arguments digest
// the approver was shown, and returns the decided approval. The Client's token must be the
// approver's. A refusal is an *Error whose Code says why (self_approval,
// approver_not_in_group, already_decided, approval_value_mismatch, approval_expired, …).
func (c *Client) Decide(ctx context.Context, id, decision, argumentsDigest string) (*api.Approval, error) {
	return post[api.Approval](ctx, c, "/v1/approvals/"+url.PathEscape(id),
		api.DecisionRequest{Decision: decision, ArgumentsDigest: argumentsDigest}, apijson.Unmarshal, "decide: undecodable approval")
}

// getJSON gets path with the Client's token and decodes a 200 into out.
func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	req, err := c.request(ctx, http.MethodGet, path, q, c.token, nil, "")
	if err != nil {
		return err
	}
	return c.decode(req, "GET "+path, out)
}
