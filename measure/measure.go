// Package measure performs the live lookups a policy declares (docs/operations.md `measurements`):
// an HTTP GET whose URL template is filled from known values, or a call of a read-only MCP tool
// on a configured server, each bounded by a timeout, the value taken at a JSON pointer into
// the reply (the body, or the tool result's structuredContent).
//
// A [Measurer] satisfies gates.Measurer. It holds the network clients so that the preflight
// engine holds none. Every failure is an [*Error] with a kind, never an empty value: the gate
// turns it into lookup_failed and definition repair. A reply that says "nothing is there" must
// say so with a JSON null at the pointer; that is a value (the null status), not a failure.
//
// Numbers are measured exactly or not at all. An HTTP body, and an MCP tool result's
// structuredContent, are checked as the server sent them: duplicate names and invalid UTF-8 are
// an ErrResponse, and so is a literal whose value a double cannot hold (9007199254740993,
// 8.000000000000001, 0.10000000000000000001); any other number is measured as the literal
// written, a json.Number. The MCP client decodes a tool result to float64, so the result's
// bytes are taken from the wire (upstream.ToolCall.Raw), bound to the call's request id, and
// the decoded result must agree with them. When the client cannot bind bytes to the call, only
// the float64 decoding is known and it fails closed: a fraction, or an integral value of
// magnitude 2^53 or more, is an ErrResponse, so that a long decimal rounded on the way in is
// never measured as the nearby double. (An integral double below 2^53 is measured as that
// integer; a literal with more than 15 significant digits that rounds to it, such as
// 2.0000000000000001, cannot be told from it then.)
package measure

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// Defaults applied by [New].
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxResponseBytes = 1 << 20
)

// Error kinds. Every error from [Measurer.Measure] is an *Error whose Kind is one of these.
var (
	// ErrDeclaration: the measurement cannot run as declared (neither http nor mcp, a tool
	// the policy does not classify read, no MCP access configured, a URL that is not http(s)).
	ErrDeclaration = errors.New("declaration")
	// ErrInput: a template reads a name that is not among the known inputs, or a value that
	// cannot be written into a template (an object, an array, null).
	ErrInput = errors.New("input")
	// ErrUnavailable: the endpoint or server could not be reached in time.
	ErrUnavailable = errors.New("unavailable")
	// ErrStatus: the HTTP reply was not 200.
	ErrStatus = errors.New("status")
	// ErrContentType: the HTTP reply is not JSON.
	ErrContentType = errors.New("content type")
	// ErrResponse: the reply is too large, not JSON, or carries a number that cannot be
	// represented exactly, or an MCP result's captured bytes disagree with its decoding.
	ErrResponse = errors.New("response")
	// ErrPointer: the pointer leads nowhere in the reply.
	ErrPointer = errors.New("pointer")
	// ErrTool: the MCP tool reported an error or returned no structured content.
	ErrTool = errors.New("tool")
)

// Error is a failed measurement. Its text never carries the filled URL or arguments, which
// hold argument values; it goes into decision records.
type Error struct {
	Name string // the measurement's name in the policy
	Via  string // "http" or "mcp"
	Kind error  // one of the Err* kinds
	Err  error  // the cause, possibly nil
}

func (e *Error) Error() string {
	s := "measurement " + e.Name
	if e.Via != "" {
		s += " (" + e.Via + ")"
	}
	s += ": " + e.Kind.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Options configure a Measurer. The zero value measures over HTTP with defaults and refuses MCP
// measurements.
type Options struct {
	// HTTPClient sends HTTP measurements. Nil uses a client over http.DefaultTransport. A copy
	// is used that never follows redirects: a measurement reads the endpoint the policy names.
	HTTPClient *http.Client
	// MCP returns the client of a configured server id, typically upstream.Catalog.Client.
	// Nil makes every MCP measurement fail.
	MCP func(ctx context.Context, server string) (*upstream.Client, error)
	// DefaultTimeout bounds a measurement whose policy entry sets no timeout. Zero means
	// DefaultTimeout.
	DefaultTimeout time.Duration
	// MaxResponseBytes bounds an HTTP reply body. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Observe, if set, is called once per measurement with its kind, duration and result
	// (metrics).
	Observe func(via string, d time.Duration, err error)
}

// Measurer performs policy measurements. It is safe for concurrent use.
type Measurer struct {
	http    *http.Client
	mcp     func(ctx context.Context, server string) (*upstream.Client, error)
	timeout time.Duration
	maxBody int64
	observe func(string, time.Duration, error)
}

// New returns a Measurer.
func New(o Options) *Measurer {
	c := http.Client{}
	if o.HTTPClient != nil {
		c = *o.HTTPClient
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	m := &Measurer{http: &c, mcp: o.MCP, timeout: o.DefaultTimeout, maxBody: o.MaxResponseBytes, observe: o.Observe}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.maxBody <= 0 {
		m.maxBody = DefaultMaxResponseBytes
	}
	return m
}

// Measure performs one measurement. inputs holds the known values its templates read. The
// value is decoded JSON with numbers as json.Number holding the exact text.
func (m *Measurer) Measure(ctx context.Context, ms *policy.Measurement, inputs map[string]any) (any, error) {
	timeout := ms.Timeout
	if timeout <= 0 {
		timeout = m.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	v, err := m.measure(ctx, ms, inputs)
	if err != nil {
		var me *Error
		if !errors.As(err, &me) {
			me = &Error{Kind: ErrUnavailable, Err: err}
		}
		me.Name, me.Via = ms.Name, ms.Via()
		err = me
	}
	if m.observe != nil {
		m.observe(ms.Via(), time.Since(start), err)
	}
	return v, err
}

func (m *Measurer) measure(ctx context.Context, ms *policy.Measurement, inputs map[string]any) (any, error) {
	switch {
	case ms.Err != nil:
		return nil, &Error{Kind: ErrDeclaration, Err: ms.Err}
	case ms.HTTP != nil && ms.MCP == nil:
		return m.measureHTTP(ctx, ms.HTTP, inputs)
	case ms.MCP != nil && ms.HTTP == nil:
		return m.measureMCP(ctx, ms.MCP, inputs)
	}
	return nil, &Error{Kind: ErrDeclaration, Err: errors.New("declares neither or both of http and mcp")}
}

var placeholder = regexp.MustCompile(`\{\{\s*([^{}\s]+)\s*\}\}`)
