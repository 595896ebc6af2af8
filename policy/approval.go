package policy

import (
	"slices"
	"strings"
	"time"
)

// Channel names a place where the approvals of a gated call may be given.
type Channel string

// The approval channels: the MCP host (the user's own answer to the approval question) and
// the console (an approver signed in at the organisation's OpenID Provider, through verdictd's
// approvals API).
const (
	ChannelHost    Channel = "host"
	ChannelConsole Channel = "console"
)

// Bounds of approval.timeout.
const (
	DefaultApprovalTimeout = 15 * time.Minute
	MinApprovalTimeout     = 10 * time.Second
	MaxApprovalTimeout     = 24 * time.Hour
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
	// Timeout is how long a pending console approval waits for its decision.
	Timeout time.Duration
}

// DefaultApprovalRule is the rule of a tool whose policy entry has no approval: host only.
func DefaultApprovalRule() ApprovalRule {
	return ApprovalRule{Channels: []Channel{ChannelHost}, Timeout: DefaultApprovalTimeout}
}

// Allows reports whether the rule lets approvals be given in channel c.
func (a ApprovalRule) Allows(c Channel) bool { return slices.Contains(a.Channels, c) }

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
	if a.Allows(ChannelConsole) {
		s += "; timeout " + a.Timeout.String()
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

// approval reads a tool's approval: channels, four_eyes, group, timeout.
func (l *loader) approval(path string, v any) *ApprovalRule {
	a := DefaultApprovalRule()
	m, ok := l.object(path, v, "channels", "four_eyes", "group", "timeout")
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
				case c != ChannelHost && c != ChannelConsole:
					l.fail(index(cp, i), "unknown channel %q (want host or console)", s)
				case slices.Contains(a.Channels, c):
					l.fail(index(cp, i), "duplicate channel %q", s)
				default:
					a.Channels = append(a.Channels, c)
				}
			}
		}
	}
	console := a.Allows(ChannelConsole)
	if v, ok := m["four_eyes"]; ok {
		fp := key(path, "four_eyes")
		a.FourEyes = l.boolean(fp, v)
		switch {
		case a.FourEyes && !console:
			l.fail(fp, "four_eyes needs console in channels: only the console tells the approver from the principal")
		case a.FourEyes && a.Allows(ChannelHost):
			l.fail(fp, "four_eyes with host in channels: the principal would approve their own call in the host")
		}
	}
	if v, ok := m["group"]; ok {
		gp := key(path, "group")
		if g, ok := l.nonEmpty(gp, v); ok {
			a.Group = g
			if !console {
				l.fail(gp, "group needs console in channels: the host has no approver token to carry it")
			}
		}
	}
	if v, ok := m["timeout"]; ok {
		tp := key(path, "timeout")
		if s, ok := l.str(tp, v); ok {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				l.fail(tp, "invalid duration %q", s)
			case d < MinApprovalTimeout || d > MaxApprovalTimeout:
				l.fail(tp, "%s: want from %s to %s", d, MinApprovalTimeout, MaxApprovalTimeout)
			case !console:
				l.fail(tp, "names nothing: only console approvals wait (channels has no console)")
			default:
				a.Timeout = d
			}
		}
	}
	return &a
}
