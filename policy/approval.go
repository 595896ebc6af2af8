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

// MaxReaders bounds approval.readers: named approvers, not a directory.
const MaxReaders = 256

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
	// Group and Readers say who holds the approver role of the tool's approvals in the
	// console: whoever's token carries Group in its groups, and the approvers Readers names
	// by id ("<issuer>#<sub>"). Only they (besides the call's principal and an admin, who read)
	// may read the approvals, and only they may decide them. The loader requires one of the two
	// with console: an approval shows every value of its call.
	Group   string
	Readers []string
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
	if len(a.Readers) > 0 {
		s += "; readers " + strings.Join(a.Readers, ", ")
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

// read reads a tool's approval (over the default rule): channels, four_eyes, group, readers,
// timeout, use_within, webhook, webhook_timeout.
func (a *ApprovalRule) read(o *object) {
	if v, ok := o.get("channels"); ok {
		a.readChannels(v)
	}
	console, outOfBand := a.Allows(ChannelConsole), a.OutOfBand()
	if v, ok := o.get("four_eyes"); ok {
		a.FourEyes, _ = v.boolean()
		switch {
		case a.FourEyes && !outOfBand:
			v.fail("four_eyes needs console or webhook in channels: only they tell the approver from the principal")
		case a.FourEyes && a.Allows(ChannelHost):
			v.fail("four_eyes with host in channels: the principal would approve their own call in the host")
		}
	}
	group, hasGroup := o.get("group")
	if hasGroup {
		var ok bool
		if a.Group, ok = group.nonEmpty(); ok && !console {
			group.fail("group needs console in channels: neither the host nor the webhook has an approver token to carry it")
		}
	}
	readers, hasReaders := o.get("readers")
	if hasReaders {
		a.readReaders(readers)
	}
	if console && !hasGroup && !hasReaders {
		// Fail closed: without either, nobody would hold the approver role, and an open rule
		// would let every token of the provider read every value of the calls.
		o.fail("console in channels needs group or readers: who may read and decide its approvals (each shows every value of its call)")
	}
	duration(o, "timeout", &a.Timeout, MinApprovalTimeout, MaxApprovalTimeout, outOfBand,
		"names nothing: only console and webhook approvals wait (channels has neither)")
	a.UseWithin = a.Timeout
	duration(o, "use_within", &a.UseWithin, MinUseWithin, MaxUseWithin, outOfBand,
		"names nothing: only console and webhook approvals are used after their decision (channels has neither)")
	a.readWebhook(o)
}

// readChannels reads approval.channels: host, console and webhook, each once, at least one.
func (a *ApprovalRule) readChannels(v value) {
	list, ok := v.strList()
	if !ok {
		return
	}
	if len(list) == 0 {
		v.fail("must not be empty (omit it for [host])")
	}
	a.Channels = []Channel{}
	for i, s := range list {
		c := Channel(s)
		switch {
		case c != ChannelHost && c != ChannelConsole && c != ChannelWebhook:
			v.r.fail(index(v.path, i), "unknown channel %q (want host, console or webhook)", s)
		case slices.Contains(a.Channels, c):
			v.r.fail(index(v.path, i), "duplicate channel %q", s)
		default:
			a.Channels = append(a.Channels, c)
		}
	}
}

// readReaders reads approval.readers: approvers' ids, "<issuer>#<sub>", each once, at most
// MaxReaders, and only with console in channels.
func (a *ApprovalRule) readReaders(v value) {
	list, ok := v.strList()
	switch {
	case !ok:
	case len(list) == 0:
		v.fail("must not be empty (omit it to name nobody)")
	case len(list) > MaxReaders:
		v.fail("%d approvers: at most %d (name a group instead)", len(list), MaxReaders)
	case !a.Allows(ChannelConsole):
		v.fail("readers needs console in channels: only a console approver has a token to be named by")
	default:
		for i, id := range list {
			switch {
			case !approverID(id):
				v.r.fail(index(v.path, i), "%q: want an approver's id, <issuer>#<sub> (the issuer's URL, \"#\", the token's subject)", id)
			case slices.Contains(a.Readers, id):
				v.r.fail(index(v.path, i), "duplicate reader %q", id)
			default:
				a.Readers = append(a.Readers, id)
			}
		}
	}
}

// approverID reports whether s is an approver's id as verdictd names them: an absolute
// http(s) issuer URL, "#" and a subject (the id is split at its first "#").
func approverID(s string) bool {
	iss, sub, ok := strings.Cut(s, "#")
	if !ok || sub == "" || strings.TrimSpace(s) != s {
		return false
	}
	u, err := url.Parse(iss)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// duration reads the duration at key name of the approval into dst, from lo to hi, which
// names something only when named (else the problem is unused).
func duration(o *object, name string, dst *time.Duration, lo, hi time.Duration, named bool, unused string) {
	v, ok := o.get(name)
	if !ok {
		return
	}
	switch d, ok := v.duration(); {
	case !ok:
	case d < lo || d > hi:
		v.fail("%s: want from %s to %s", d, lo, hi)
	case !named:
		v.fail("%s", unused)
	default:
		*dst = d
	}
}

// readWebhook reads approval.webhook and approval.webhook_timeout: the URL is required exactly
// when channels has webhook.
func (a *ApprovalRule) readWebhook(o *object) {
	v, ok := o.get("webhook")
	switch {
	case !ok && a.Allows(ChannelWebhook):
		o.fail("webhook in channels needs webhook: the URL asked for the decision")
	case ok && !a.Allows(ChannelWebhook):
		v.fail("names nothing: channels has no webhook")
	case ok:
		if s, ok := v.nonEmpty(); ok {
			if err := checkWebhookURL(s); err != "" {
				v.fail("%q: %s", s, err)
			} else {
				a.Webhook = s
			}
		}
	}
	if a.Allows(ChannelWebhook) {
		a.WebhookTimeout = DefaultWebhookTimeout
	}
	duration(o, "webhook_timeout", &a.WebhookTimeout, MinWebhookTimeout, MaxWebhookTimeout, a.Allows(ChannelWebhook),
		"names nothing: channels has no webhook")
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
