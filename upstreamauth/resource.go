package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/identity"
)

// DiscoverResource returns the protected resource metadata (RFC 9728) of the resource at
// resourceURL, an upstream MCP server's URL, where MCP clients look for it: first at the URL
// the server names in the resource_metadata of the Bearer challenge of its 401 to a request
// without a token (RFC 9728 §5.1, ResourceMetadataURL; the request is a GET of the resource,
// which nothing runs on), then, when it answers no such challenge or nothing is at the URL it
// names, at the well-known location with the resource's path inserted
// (https://host/.well-known/oauth-protected-resource/path, RFC 9728 §3.1), then at the host's
// root (…/oauth-protected-resource). Any document must be resourceURL's own (FetchResource).
// None anywhere is ErrNotFound.
func DiscoverResource(ctx context.Context, hc *http.Client, resourceURL string) (*identity.ResourceMetadata, error) {
	if err := secureURL("resource", resourceURL, ""); err != nil {
		return nil, err
	}
	inserted, err := identity.MetadataURL(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %v", ErrInsecureURL, err)
	}
	named, err := challengedMetadata(ctx, hc, resourceURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(resourceURL)
	root := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: identity.WellKnownPath}).String()
	for _, at := range slices.Compact([]string{named, inserted, root}) {
		if at == "" {
			continue
		}
		m, err := FetchResource(ctx, hc, resourceURL, at)
		if !errors.Is(err, ErrNotFound) {
			return m, err
		}
	}
	return nil, fmt.Errorf("%w: for the resource %s", ErrNotFound, resourceURL)
}

// challengedMetadata asks the resource without a token and returns the metadata URL its 401's
// Bearer challenge names, or "" when it answers otherwise or names none. The URL is held to the
// rules of any metadata URL where it is fetched (FetchResource: https, or http on loopback, and
// never plain http for an https resource): a challenge cannot send the client where a
// configured URL could not.
func challengedMetadata(ctx context.Context, hc *http.Client, resourceURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, resourceURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w: resource: %v", ErrInsecureURL, err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := noRedirect(hc).Do(req)
	if err != nil {
		return "", unreachable(resourceURL, err, nil)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument)) // so that the connection is kept
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", nil
	}
	named, _, err := ResourceMetadataURL(strings.Join(resp.Header.Values("WWW-Authenticate"), ", "))
	if errors.Is(err, ErrNoResourceMetadata) {
		return "", nil
	}
	return named, err
}

// FetchResource returns the protected resource metadata of resourceURL at metadataURL (the
// URL a 401 named, ResourceMetadataURL, or a well-known one). The document's resource must be
// resourceURL exactly (RFC 9728 §3.3: else ErrResourceMismatch, as a document could otherwise
// send the client to the authorization server of another resource); it must name at least one
// authorization server, each https (http only on loopback, and only for an http resource);
// and, if it lists bearer methods, the header among them, the one way tokens are sent here.
func FetchResource(ctx context.Context, hc *http.Client, resourceURL, metadataURL string) (*identity.ResourceMetadata, error) {
	if err := secureURL("resource", resourceURL, ""); err != nil {
		return nil, err
	}
	if err := secureURL("resource_metadata", metadataURL, resourceURL); err != nil {
		return nil, err
	}
	body, err := getDocument(ctx, hc, metadataURL)
	if err != nil {
		return nil, err
	}
	return decodeResource(body, resourceURL)
}

// decodeResource reads and checks a protected resource metadata document for resourceURL.
// The decoder refuses a member named twice, so that no second "resource" can follow the one
// checked.
func decodeResource(body []byte, resourceURL string) (*identity.ResourceMetadata, error) {
	var m identity.ResourceMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMetadata, err)
	}
	if m.Resource != resourceURL {
		return nil, fmt.Errorf("%w: the document is for %.200q, not %s", ErrResourceMismatch, m.Resource, resourceURL)
	}
	if len(m.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%w: the resource %s names no authorization server", ErrMetadata, resourceURL)
	}
	for _, as := range m.AuthorizationServers {
		if err := secureURL("authorization_servers", as, resourceURL); err != nil {
			return nil, err
		}
	}
	if len(m.BearerMethodsSupported) > 0 && !slices.Contains(m.BearerMethodsSupported, "header") {
		return nil, fmt.Errorf("%w: the resource %s does not take tokens in the Authorization header", ErrMetadata, resourceURL)
	}
	return &m, nil
}
