package upstreamauth

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/verdictgate/verdict/internal/loopback"
)

// maxDocument bounds what is read of a metadata document and of a registration endpoint's or
// a revocation endpoint's answer: each is a few KiB at most.
const maxDocument = 64 << 10

// noRedirect returns a copy of hc (http.DefaultClient's settings when nil) that follows no
// redirect: the answer to every request here is the server's own, and a redirect followed
// would send the request, with its code, token or secret, wherever it named.
func noRedirect(hc *http.Client) *http.Client {
	c := http.Client{}
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// secureURL checks u, named by base (the URL of the resource or the issuer whose document
// named it; "" for a URL given by the caller): https, or http on a loopback host, and http
// only where base is http too, so that an https server cannot send what the client sends it
// to plain http, not even on the client's own host.
func secureURL(what, u, base string) error {
	if err := loopback.SecureURL(u); err != nil {
		return fmt.Errorf("%w: %s %v", ErrInsecureURL, what, err)
	}
	if base == "" {
		return nil
	}
	p, _ := url.Parse(u) // SecureURL parsed it
	b, err := url.Parse(base)
	if p.Scheme == "http" && (err != nil || b.Scheme != "http") {
		return fmt.Errorf("%w: %s %.200q is plain http, named by the https %.200q", ErrInsecureURL, what, u, base)
	}
	return nil
}

// status names an answer's status by its code alone: the reason phrase is the server's text.
func status(resp *http.Response) string {
	return strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
}

// readBounded reads at most maxDocument bytes of what's answer; a longer one is refused as
// kind (ErrMetadata, ErrAnswer), a read that fails is ErrUnreachable.
func readBounded(kind error, what string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, unreachable(what, err, nil)
	}
	if len(b) > maxDocument {
		return nil, fmt.Errorf("%w: %s: the answer is longer than %d bytes", kind, what, maxDocument)
	}
	return b, nil
}

// post sends body, of contentType, to u, endpoint's URL, with what set adds to the request,
// and reads the answer (readBounded); a request that got no answer is unreachable's, with
// secrets cut out. The answer's status is the caller's to judge.
func post(ctx context.Context, hc *http.Client, endpoint, u, contentType string, body []byte, secrets []string, set func(*http.Request)) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	req.Header.Set("Content-Type", contentType)
	set(req)
	resp, err := noRedirect(hc).Do(req)
	if err != nil {
		return nil, nil, unreachable(endpoint+" endpoint", err, secrets)
	}
	defer resp.Body.Close()
	answer, err := readBounded(ErrAnswer, endpoint+" endpoint", resp.Body)
	return resp, answer, err
}

// isJSON reports whether an answer says it is JSON.
func isJSON(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// getDocument fetches the metadata document at u. A 4xx is ErrNotFound, which sends discovery
// on to the next well-known location; any other status but 200, a redirect, a body that is not
// JSON or is too long are ErrMetadata.
func getDocument(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMetadata, u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := noRedirect(hc).Do(req)
	if err != nil {
		return nil, unreachable(u, err, nil)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, fmt.Errorf("%w: %s answered %s", ErrNotFound, u, status(resp))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s answered %s (redirects are not followed)", ErrMetadata, u, status(resp))
	case !isJSON(resp):
		return nil, fmt.Errorf("%w: %s is not application/json", ErrMetadata, u)
	}
	return readBounded(ErrMetadata, u, resp.Body)
}
