package mcpgate

import (
	"sync"

	"github.com/verdictgate/verdict/waiting"
)

// heldCalls accounts for the calls of hosts asked in place (elicitation/create, hosts before
// 2026-07-28): such a call holds its state in the gateway's memory for as long as the host
// takes to answer, outside the state store. It is held to the same bounds as the store
// (waiting.Admit), by its size when it started, so a principal cannot get around its share by speaking an older
// revision.
type heldCalls struct {
	mu   sync.Mutex
	mine map[string]waiting.Usage
	all  waiting.Usage
}

func newHeldCalls() *heldCalls { return &heldCalls{mine: map[string]waiting.Usage{}} }

// hold admits one call of size bytes for principal, or says which bound refuses it. release
// gives its place back when the call ends.
func (h *heldCalls) hold(principal string, size int, lim waiting.Limits) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := waiting.Admit(size, h.mine[principal], h.all, lim); err != nil {
		return nil, err
	}
	h.add(principal, waiting.Usage{Count: 1, Bytes: size})
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.add(principal, waiting.Usage{Count: -1, Bytes: -size})
		})
	}, nil
}

// add changes principal's holdings by d. The caller holds mu.
func (h *heldCalls) add(principal string, d waiting.Usage) {
	u := h.mine[principal]
	u = waiting.Usage{Count: u.Count + d.Count, Bytes: u.Bytes + d.Bytes}
	if u.Count == 0 {
		delete(h.mine, principal)
	} else {
		h.mine[principal] = u
	}
	h.all = waiting.Usage{Count: h.all.Count + d.Count, Bytes: h.all.Bytes + d.Bytes}
}
