// Package webhook is the HTTP approver of the fixed checklist's tool match (C3): for a tool
// whose policy names a webhook, it asks that URL whether the tool produces the state change the
// user named. It fails closed: a transport error, a timeout, a status other than 200, a body
// that is not JSON, or an "approved" member that is missing or not a boolean is an error, and
// the gate treats every error as "not approved".
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/gates"
)

// Defaults applied by [New].
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxResponseBytes = 64 << 10
)

// ErrMalformed is returned for a reply that does not say approved or not approved.
var ErrMalformed = errors.New("webhook: malformed reply")

// Request is the JSON body posted to the webhook.
type Request struct {
	Principal      string   `json:"principal"`
	Server         string   `json:"server"`
	Tool           string   `json:"tool"`
	UserActionName string   `json:"user_action_name"`
	Normalized     string   `json:"normalized_action_name"`
	Actions        []string `json:"actions"`
}

// Reply is what the webhook answers: {"approved": true|false, "reason": "..."}.
type Reply struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// Options configure an Approver.
type Options struct {
	// Client posts the requests. Nil uses a client over http.DefaultTransport. A copy is used
	// that never follows redirects.
	Client *http.Client
	// Timeout bounds one approval. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds the reply body. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Approver is a gates.Approver over HTTP. It is safe for concurrent use.
type Approver struct {
	client  *http.Client
	timeout time.Duration
	max     int64
}

var _ gates.Approver = (*Approver)(nil)

// New returns an Approver.
func New(o Options) *Approver {
	c := http.Client{}
	if o.Client != nil {
		c = *o.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	a := &Approver{client: &c, timeout: o.Timeout, max: o.MaxResponseBytes}
	if a.timeout <= 0 {
		a.timeout = DefaultTimeout
	}
	if a.max <= 0 {
		a.max = DefaultMaxResponseBytes
	}
	return a
}

// Approve implements gates.Approver. Only a 200 reply whose "approved" is the JSON value true
// approves.
func (a *Approver) Approve(ctx context.Context, req gates.ApprovalRequest) (gates.Approval, error) {
	if req.Policy == nil || req.Policy.Approver == nil || req.Policy.Approver.Webhook == "" {
		return gates.Approval{}, errors.New("webhook: the tool's policy names no webhook")
	}
	u, err := url.Parse(req.Policy.Approver.Webhook)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return gates.Approval{}, errors.New("webhook: the policy's webhook is not an absolute http(s) URL")
	}
	body, err := json.Marshal(Request{Principal: req.Principal, Server: req.Server, Tool: req.Tool,
		UserActionName: req.UserActionName, Normalized: req.Normalized, Actions: append([]string{}, req.Policy.Actions...)})
	if err != nil {
		return gates.Approval{}, fmt.Errorf("webhook: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return gates.Approval{}, fmt.Errorf("webhook: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(hr)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return gates.Approval{}, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return gates.Approval{}, fmt.Errorf("webhook: answered %d", resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return gates.Approval{}, fmt.Errorf("%w: content type %q", ErrMalformed, resp.Header.Get("Content-Type"))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, a.max+1))
	if err != nil {
		return gates.Approval{}, fmt.Errorf("webhook: read reply: %w", err)
	}
	if int64(len(raw)) > a.max {
		return gates.Approval{}, fmt.Errorf("%w: reply exceeds %d bytes", ErrMalformed, a.max)
	}
	// Duplicate members could say both; a reply must have exactly one reading.
	if err := canonical.Validate(raw); err != nil {
		return gates.Approval{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// Only the exact name may say approved, and no other spelling of it may say otherwise: a
	// reader that folds case (encoding/json does) would read "Approved" or "APPROVED" as the
	// member, the last one winning. So the reply is read twice, by exact and by folded names,
	// and must mean the same both ways. Other members are the approver's own and are ignored;
	// a duplicate member is refused.
	var rep, folded Reply
	if jsonv2.Unmarshal(raw, &rep) != nil || rep.Approved == nil ||
		jsonv2.Unmarshal(raw, &folded, jsonv2.MatchCaseInsensitiveNames(true)) != nil ||
		folded.Approved == nil || *folded.Approved != *rep.Approved || folded.Reason != rep.Reason {
		return gates.Approval{}, fmt.Errorf("%w: want {\"approved\": true|false}", ErrMalformed)
	}
	if !*rep.Approved {
		return gates.Approval{Reason: rep.Reason}, nil
	}
	return gates.Approval{Approved: true, By: "webhook", Reason: rep.Reason}, nil
}
