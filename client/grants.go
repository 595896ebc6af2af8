package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
)

// Grants lists what may be shown of principal's grants at the executor (GET /v1/grants, with
// the admin token): no token is ever in it.
func (c *Client) Grants(ctx context.Context, principal string) ([]api.Grant, error) {
	out, err := call[api.Grants](ctx, c, http.MethodGet, "/v1/grants", url.Values{"principal": {principal}}, c.admin)
	if err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// RevokeGrant revokes principal's grant at server (DELETE /v1/grants/{server}, with the admin
// token): at its authorization server when that offers revocation, and at the executor in any
// case.
func (c *Client) RevokeGrant(ctx context.Context, principal, server string) (*api.GrantRevoked, error) {
	return call[api.GrantRevoked](ctx, c, http.MethodDelete, "/v1/grants/"+url.PathEscape(server), url.Values{"principal": {principal}}, c.admin)
}

// call sends a request of method to path with token and no body, and decodes a 200 answer
// into a new T.
func call[T any](ctx context.Context, c *Client, method, path string, q url.Values, token string) (*T, error) {
	req, err := c.request(ctx, method, path, q, token, nil, "")
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := c.decode(req, req.Method+" "+req.URL.Path, out); err != nil {
		return nil, err
	}
	return out, nil
}

// decode sends req and decodes a 200 answer into out; any other status is its refusal, and an
// answer that does not decode an error naming the request as name.
func (c *Client) decode(req *http.Request, name string, out any) error {
	status, body, err := c.do(req)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return refusal(status, body)
	}
	if err := apijson.Unmarshal(body, out); err != nil {
		return fmt.Errorf("client: %s: undecodable answer: %w", name, err)
	}
	return nil
}

// Connection asks the executor whether the user whose token comes with ctx (WithSubjectToken,
// or a transport that adds it) has an account connected at server, waiting up to wait for one
// (GET /v1/connections/{server}, with the caller token).
func (c *Client) Connection(ctx context.Context, server string, wait time.Duration) (*api.Connection, error) {
	return call[api.Connection](ctx, c, http.MethodGet, "/v1/connections/"+url.PathEscape(server), url.Values{"wait": {wait.String()}}, c.token)
}
