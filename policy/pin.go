package policy

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/verdictgate/verdict/api"
)

// A Pin holds a server's tools to the definitions an operator reviewed, by their definition
// digests (the verdict's tsd). A tool whose listed definition no longer matches its pin is not
// run, not listed by the gateway and not signed for, until the operator pins it again: a tool
// server cannot quietly change what a tool does or says it does.
type Pin struct {
	// All pins the whole server: a tool it lists without a pin (a new tool) is held back too.
	All bool
	// Tools are the pinned digests by tool name.
	Tools map[string]string
}

// Reasons a tool is held back by its pin.
var (
	// ErrPinMismatch: the tool's listed definition is not the pinned one.
	ErrPinMismatch = errors.New(api.GateDefinitionUnpinned)
	// ErrUnpinned: the server is pinned whole and this tool has no pin.
	ErrUnpinned = errors.New("tool_unpinned")
)

// PinError says which tool its pin holds back, and why (errors.Is ErrPinMismatch or
// ErrUnpinned).
type PinError struct {
	Server, Tool string
	Pinned, Got  string // Pinned is "" for ErrUnpinned
	Err          error
}

func (e *PinError) Error() string {
	if errors.Is(e.Err, ErrUnpinned) {
		return fmt.Sprintf("tool %s/%s is not pinned, and server %s is pinned whole (its definition is %s)", e.Server, e.Tool, e.Server, e.Got)
	}
	return fmt.Sprintf("tool %s/%s changed: its definition is %s, pinned %s", e.Server, e.Tool, e.Got, e.Pinned)
}

func (e *PinError) Unwrap() error { return e.Err }

// CheckPin reports whether the tool, listed now with definition digest got, may be used under
// p's pins: nil when its server is not pinned, or the tool's pin matches; a *PinError otherwise.
func (p *Policy) CheckPin(server, tool, got string) error {
	if p == nil {
		return nil
	}
	pin := p.Pins[server]
	if pin == nil {
		return nil
	}
	want, ok := pin.Tools[tool]
	switch {
	case ok && want == got:
		return nil
	case ok:
		return &PinError{Server: server, Tool: tool, Pinned: want, Got: got, Err: ErrPinMismatch}
	case pin.All:
		return &PinError{Server: server, Tool: tool, Got: got, Err: ErrUnpinned}
	}
	return nil
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// read reads one server's pins: {all, tools: {tool: digest}}.
func (pin *Pin) read(o *object) {
	set(o, "all", &pin.All, value.boolean)
	pin.Tools = mapOf(o, "tools", func(_ string, v value) string {
		d, ok := v.str()
		if ok && !digestPattern.MatchString(d) {
			v.fail("a pin is a tool definition digest, sha256: and 64 lower-case hex digits (verdictd catalog pin prints them)")
		}
		return d
	})
	if !pin.All && len(pin.Tools) == 0 {
		o.fail("pins nothing: give tools, or all: true")
	}
}
