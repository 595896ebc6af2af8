package policy

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/loopback"
)

// Channel names a place where the approvals of a gated call may be given.
type Channel string

// The approval channels: the MCP host (the user's own answer to the approval question), the
// console (an approver signed in at the organisation's OpenID Provider, through verdictd's
// approvals API) and the webhook (another system of the organisation, asked by verdictd).
const (
	ChannelHost    Channel = "host"
	ChannelConsole Channel = "console"
	ChannelWebhook Channel = "webhook"
)

// Bounds of approval.timeout.
const (
	DefaultApprovalTimeout = 15 * time.Minute
	MinApprovalTimeout     = 10 * time.Second
	MaxApprovalTimeout     = 24 * time.Hour
)

// Bounds of approval.use_within: how long after its decision an approval may be used. Its
// default is the rule's timeout.
const (
	MinUseWithin = 10 * time.Second
	MaxUseWithin = 24 * time.Hour
)

// Bounds of approval.webhook_timeout: how long one request to the approval webhook may take.
const (
	DefaultWebhookTimeout = 5 * time.Second
	MinWebhookTimeout     = time.Second
	MaxWebhookTimeout     = 30 * time.Second
)

// ApprovalRule says where and by whom the approvals of a tool's calls are given. A tool
// without one takes its approvals in the host only ([DefaultApprovalRule]).
type ApprovalRule struct {
	// Channels are where the approvals may be given, never empty.
	Channels []Channel
	// FourEyes: the approver must not be the call's principal. Only the console can tell the
	// approver from the principal, so the loader requires console and refuses host with it.
	FourEyes bool
	// Group, when set, must be among the groups the approver's token carries.
	Group string
	// Timeout is how long a pending approval waits for its decision.
	Timeout time.Duration
	// UseWithin is how long after its decision an approval may be used: an approval not used
	// by then lapses (the call is refused approval_lapsed). It defaults to Timeout.
	UseWithin time.Duration
	// Webhook is the absolute http(s) URL asked for the decision, set exactly when Channels
	// has ChannelWebhook; WebhookTimeout bounds one request to it.
	Webhook        string
	WebhookTimeout time.Duration
}

// DefaultApprovalRule is the rule of a tool whose policy entry has no approval: host only.
func DefaultApprovalRule() ApprovalRule {
	return ApprovalRule{Channels: []Channel{ChannelHost}, Timeout: DefaultApprovalTimeout, UseWithin: DefaultApprovalTimeout}
}

// Allows reports whether the rule lets approvals be given in channel c.
func (a ApprovalRule) Allows(c Channel) bool { return slices.Contains(a.Channels, c) }

// OutOfBand reports whether the rule takes approvals outside the host (in the console or from
// the webhook): then a gated call waiting for its approval gets a pending approval of its exact
// values, which verdictd keeps until it is decided or expires.
func (a ApprovalRule) OutOfBand() bool {
	return a.Allows(ChannelConsole) || a.Allows(ChannelWebhook)
}

// String describes the rule on one line, as check-policy prints it.
func (a ApprovalRule) String() string {
	cs := make([]string, len(a.Channels))
	for i, c := range a.Channels {
		cs[i] = string(c)
	}
	s := "channels " + strings.Join(cs, ", ")
	if a.FourEyes {
		s += "; four eyes"
	}
	if a.Group != "" {
		s += "; group " + a.Group
	}
	if a.Webhook != "" {
		s += "; webhook " + shownURL(a.Webhook) + " (request timeout " + a.WebhookTimeout.String() + ")"
	}
	if a.OutOfBand() {
		s += "; timeout " + a.Timeout.String() + "; use within " + a.UseWithin.String()
	}
	return s
}

// ApprovalRule returns the tool's approval rule, or the default for a tool without one (or
// without a policy entry).
func (t *Tool) ApprovalRule() ApprovalRule {
	if t == nil || t.Approval == nil {
		return DefaultApprovalRule()
	}
	return *t.Approval
}

// approval reads a tool's approval: channels, four_eyes, group, timeout, use_within, webhook,
// webhook_timeout.
func (l *loader) approval(path string, v any) *ApprovalRule {
	a := DefaultApprovalRule()
	m, ok := l.object(path, v, "channels", "four_eyes", "group", "timeout", "use_within", "webhook", "webhook_timeout")
	if !ok {
		return &a
	}
	if v, ok := m["channels"]; ok {
		cp := key(path, "channels")
		if list, ok := l.strList(cp, v); ok {
			if len(list) == 0 {
				l.fail(cp, "must not be empty (omit it for [host])")
			}
			a.Channels = []Channel{}
			for i, s := range list {
				c := Channel(s)
				switch {
				case c != ChannelHost && c != ChannelConsole && c != ChannelWebhook:
					l.fail(index(cp, i), "unknown channel %q (want host, console or webhook)", s)
				case slices.Contains(a.Channels, c):
					l.fail(index(cp, i), "duplicate channel %q", s)
				default:
					a.Channels = append(a.Channels, c)
				}
			}
		}
	}
	console, outOfBand := a.Allows(ChannelConsole), a.OutOfBand()
	if v, ok := m["four_eyes"]; ok {
		fp := key(path, "four_eyes")
		a.FourEyes = l.boolean(fp, v)
		switch {
		case a.FourEyes && !outOfBand:
			l.fail(fp, "four_eyes needs console or webhook in channels: only they tell the approver from the principal")
		case a.FourEyes && a.Allows(ChannelHost):
			l.fail(fp, "four_eyes with host in channels: the principal would approve their own call in the host")
		}
	}
	if v, ok := m["group"]; ok {
		gp := key(path, "group")
		if g, ok := l.nonEmpty(gp, v); ok {
			a.Group = g
			if !console {
				l.fail(gp, "group needs console in channels: neither the host nor the webhook has an approver token to carry it")
			}
		}
	}
	if d, ok := l.approvalDuration(path, m, "timeout", MinApprovalTimeout, MaxApprovalTimeout, outOfBand,
		"names nothing: only console and webhook approvals wait (channels has neither)"); ok {
		a.Timeout = d
	}
	a.UseWithin = a.Timeout
	if d, ok := l.approvalDuration(path, m, "use_within", MinUseWithin, MaxUseWithin, outOfBand,
		"names nothing: only console and webhook approvals are used after their decision (channels has neither)"); ok {
		a.UseWithin = d
	}
	l.webhook(path, m, &a)
	return &a
}

// approvalDuration reads the duration m[name] of the approval at path, from lo to hi, which
// names something only when outOfBand (else the problem is unused). ok is false when it is
// absent or wrong (the problem is reported).
func (l *loader) approvalDuration(path string, m map[string]any, name string, lo, hi time.Duration, outOfBand bool, unused string) (time.Duration, bool) {
	v, ok := m[name]
	if !ok {
		return 0, false
	}
	p := key(path, name)
	s, ok := l.str(p, v)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		l.fail(p, "invalid duration %q", s)
	case d < lo || d > hi:
		l.fail(p, "%s: want from %s to %s", d, lo, hi)
	case !outOfBand:
		l.fail(p, "%s", unused)
	default:
		return d, true
	}
	return 0, false
}

// webhook reads approval.webhook and approval.webhook_timeout into a: the URL is required
// exactly when channels has webhook.
func (l *loader) webhook(path string, m map[string]any, a *ApprovalRule) {
	wp := key(path, "webhook")
	v, ok := m["webhook"]
	switch {
	case !ok && a.Allows(ChannelWebhook):
		l.fail(path, "webhook in channels needs webhook: the URL asked for the decision")
	case ok && !a.Allows(ChannelWebhook):
		l.fail(wp, "names nothing: channels has no webhook")
	case ok:
		if s, ok := l.nonEmpty(wp, v); ok {
			if err := checkWebhookURL(s); err != "" {
				l.fail(wp, "%q: %s", s, err)
			} else {
				a.Webhook = s
			}
		}
	}
	if a.Allows(ChannelWebhook) {
		a.WebhookTimeout = DefaultWebhookTimeout
	}
	v, ok = m["webhook_timeout"]
	if !ok {
		return
	}
	tp := key(path, "webhook_timeout")
	s, ok := l.str(tp, v)
	if !ok {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		l.fail(tp, "invalid duration %q", s)
	case d < MinWebhookTimeout || d > MaxWebhookTimeout:
		l.fail(tp, "%s: want from %s to %s", d, MinWebhookTimeout, MaxWebhookTimeout)
	case !a.Allows(ChannelWebhook):
		l.fail(tp, "names nothing: channels has no webhook")
	default:
		a.WebhookTimeout = d
	}
}

// shownURL is u without its query, which may carry a secret, as check-policy prints it.
func shownURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(invalid URL)"
	}
	if p.RawQuery != "" {
		p.RawQuery = "…"
	}
	return p.String()
}

// checkWebhookURL says what is wrong with an approval webhook's URL, "" when nothing: it must be
// absolute http(s) with a host, without credentials or a fragment, and plain http only to a
// loopback host (the request carries every value of the call).
func checkWebhookURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.Opaque != "":
		return "want an absolute http(s) URL"
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "must not have a fragment"
	case u.Scheme == "http" && !loopback.Host(u.Hostname()):
		return "plain http only to a loopback host (the request carries every value of the call)"
	}
	return ""
}
