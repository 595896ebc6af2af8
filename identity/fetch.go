package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/verdictgate/verdict/internal/loopback"
)

// maxDocument bounds what is read of an authorization server's answer: metadata, a key set
// and an introspection response are all far smaller.
const maxDocument = 1 << 20

// errNotFound marks a well-known document the server does not have, which sends discovery on
// to the next well-known location.
var errNotFound = errors.New("not found")

// getJSON fetches u into v. A status other than 200 is an error (errNotFound for 404).
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	return doJSON(client, req, v)
}

func doJSON(client *http.Client, req *http.Request, v any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s %s: %s: %w", req.Method, req.URL, resp.Status, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s %s: %s", req.Method, req.URL, resp.Status)
	case len(body) > maxDocument:
		return fmt.Errorf("%s %s: answer larger than %d bytes", req.Method, req.URL, maxDocument)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	return nil
}

// metadata is what the verifier needs of OpenID Provider metadata or RFC 8414 authorization
// server metadata.
type metadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// discover fetches issuer's metadata: OpenID Connect discovery first, then, if the server has
// no such document, RFC 8414 (whose well-known suffix goes before the issuer's path). The
// document must name issuer exactly (OpenID Connect Discovery §4.3, RFC 8414 §3.3), or a
// server could pass off another issuer's keys as its own.
func discover(ctx context.Context, client *http.Client, issuer string) (*metadata, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	oidc := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	oauth := u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.EscapedPath(), "/")
	var m metadata
	err = getJSON(ctx, client, oidc, &m)
	if errors.Is(err, errNotFound) {
		m = metadata{}
		err = getJSON(ctx, client, oauth, &m)
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if m.Issuer != issuer {
		return nil, fmt.Errorf("discovery: metadata names issuer %q, not %q", m.Issuer, issuer)
	}
	if err := loopback.SecureURL(m.JWKSURI); err != nil {
		return nil, fmt.Errorf("discovery: jwks_uri %v", err)
	}
	return &m, nil
}
