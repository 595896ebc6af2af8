package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/verdictgate/verdict/api"
)

// MaxAnswerBytes bounds an answer a Client reads. An export's lines are bounded one by one
// (MaxLineBytes), not in total.
const MaxAnswerBytes = 8 << 20

// MaxLineBytes bounds one line of an export.
const MaxLineBytes = 16 << 20

// SubjectTokenHeader carries the user's own access token to verdictd (docs/identity.md).
const SubjectTokenHeader = "Verdict-Subject-Token"

// Client calls one daemon, verdictd or the executor. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	admin string
	hc    *http.Client
}

// An Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client the Client sends its requests with (timeouts, TLS,
// proxies, a transport that adds headers). The default is http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithToken sets the caller token sent as a bearer token on preflights, receipts and
// executions.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithAdminToken sets the admin token sent as a bearer token on record reads and exports.
func WithAdminToken(token string) Option { return func(c *Client) { c.admin = token } }

// New returns a Client of the daemon at base, such as "https://verdictd.internal:8443".
func New(base string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port][/path]", base)
	}
	c := &Client{base: u, hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	return c, nil
}

type subjectKey struct{}

// WithSubjectToken returns a context whose requests to verdictd carry token in the
// Verdict-Subject-Token header: verdictd then takes the principal from it.
func WithSubjectToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, subjectKey{}, token)
}

// Error is a daemon's refusal: any answer but the one a call expects. Code is the error
// envelope's code ({"error": {"code", "message"}}), stable and meant for programs; it is empty
// only when the answer had no envelope (a proxy's page, say), and Message then holds the
// start of the body.
type Error struct {
	Status  int
	Code    string
	Message string
	// ConnectURL is the page where the user connects an account, on a refusal that names one.
	ConnectURL string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// refusal reads the error envelope of a non-2xx answer.
func refusal(status int, body []byte) *Error {
	e := &Error{Status: status}
	var env api.ErrorBody
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message, e.ConnectURL = env.Error.Code, env.Error.Message, env.Error.ConnectURL
		return e
	}
	e.Message = string(body[:min(len(body), 256)])
	return e
}

// request builds a request to path with a bearer token.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, token string, body []byte, contentType string) (*http.Request, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if tok, _ := ctx.Value(subjectKey{}).(string); tok != "" {
		req.Header.Set(SubjectTokenHeader, tok)
	}
	return req, nil
}

// do sends a request and reads the whole answer, bounded. A transport failure is an error;
// an HTTP status is data.
func (c *Client) do(req *http.Request) (int, []byte, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("client: %s %s: read answer: %w", req.Method, req.URL.Path, err)
	}
	if len(out) > MaxAnswerBytes {
		return resp.StatusCode, nil, fmt.Errorf("client: %s %s: %w (%d bytes)", req.Method, req.URL.Path, ErrAnswerTooLarge, MaxAnswerBytes)
	}
	return resp.StatusCode, out, nil
}

// ErrAnswerTooLarge: an answer was larger than the Client reads.
var ErrAnswerTooLarge = errors.New("answer larger than the limit")

// postJSON posts v as JSON with the caller token.
func (c *Client) postJSON(ctx context.Context, path string, v any) (int, []byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, nil, fmt.Errorf("client: encode request: %w", err)
	}
	req, err := c.request(ctx, http.MethodPost, path, nil, c.token, b, "application/json")
	if err != nil {
		return 0, nil, err
	}
	return c.do(req)
}

// post posts in as JSON with the caller token and reads a 200 answer into a new T with
// unmarshal; any other status is its refusal, and an answer that does not decode an error
// that undecodable says the start of.
func post[T any](ctx context.Context, c *Client, path string, in any, unmarshal func([]byte, any) error, undecodable string) (*T, error) {
	status, body, err := c.postJSON(ctx, path, in)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, refusal(status, body)
	}
	out := new(T)
	if err := unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("client: %s: %w", undecodable, err)
	}
	return out, nil
}

// Ready asks the daemon's /readyz whether it can take requests. A daemon that answers but is
// not ready is an *Error whose Message lists what it is waiting for.
func (c *Client) Ready(ctx context.Context) error {
	req, err := c.request(ctx, http.MethodGet, "/readyz", nil, "", nil, "")
	if err != nil {
		return err
	}
	status, body, err := c.do(req)
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		return nil
	}
	var ans struct {
		Problems []string `json:"problems"`
	}
	e := &Error{Status: status, Code: "not_ready"}
	if json.Unmarshal(body, &ans) == nil {
		e.Message = strings.Join(ans.Problems, "; ")
	}
	return e
}
