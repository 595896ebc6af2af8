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
	req, err := c.request(ctx, http.MethodGet, "/v1/grants", url.Values{"principal": {principal}}, c.admin, nil, "")
	if err != nil {
		return nil, err
	}
	var out api.Grants
	if err := c.decode(req, http.StatusOK, &out); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// RevokeGrant revokes principal's grant at server (DELETE /v1/grants/{server}, with the admin
// token): at its authorization server when that offers revocation, and at the executor in any
// case.
func (c *Client) RevokeGrant(ctx context.Context, principal, server string) (*api.GrantRevoked, error) {
	req, err := c.request(ctx, http.MethodDelete, "/v1/grants/"+url.PathEscape(server), url.Values{"principal": {principal}}, c.admin, nil, "")
	if err != nil {
		return nil, err
	}
	var out api.GrantRevoked
	if err := c.decode(req, http.StatusOK, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// decode sends req and decodes an answer of status want into out; any other is its refusal.
func (c *Client) decode(req *http.Request, want int, out any) error {
	status, body, err := c.do(req)
	if err != nil {
		return err
	}
	if status != want {
		return refusal(status, body)
	}
	if err := apijson.Unmarshal(body, out); err != nil {
		return fmt.Errorf("client: %s %s: undecodable answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// Connection asks the executor whether the user whose token comes with ctx (WithSubjectToken,
// or a transport that adds it) has an account connected at server, waiting up to wait for one
// (GET /v1/connections/{server}, with the caller token).
func (c *Client) Connection(ctx context.Context, server string, wait time.Duration) (*api.Connection, error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/connections/"+url.PathEscape(server), url.Values{"wait": {wait.String()}}, c.token, nil, "")
	if err != nil {
		return nil, err
	}
	var out api.Connection
	if err := c.decode(req, http.StatusOK, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
