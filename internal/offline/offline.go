// Package offline runs the preflight engine in process, apart from the world: the engine
// verdictd runs (gates.Engine with the CEL evaluator) on a set clock and counted ids, with
// tool definitions held back by the policy's pins as verdictd holds them. `verdictd policy
// test` (package policytest) and `verdictd policy replay` (package replay) decide with it.
package offline

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

// NewEngine returns the engine verdictd runs, with the CEL evaluator, reading the time from
// clock and making ids from ids. measurer and webhook may be nil when every run brings its own
// (gates.Input).
func NewEngine(clock func() time.Time, ids gates.IDSource, measurer gates.Measurer, webhook gates.Approver) (*gates.Engine, error) {
	ev, err := gates.NewCELEvaluator()
	if err != nil {
		return nil, err
	}
	return gates.New(gates.Config{Clock: clock, IDs: ids, Measurer: measurer, Webhook: webhook, Evaluator: ev})
}

// Clock is a clock set between runs: a run never reads the real time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Set sets the time runs read from now on.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Now is the time set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// CountedIDs makes ids by counting ("rec_0001", "q_0002"), from 1 again after Reset, so that
// the same runs make the same records.
type CountedIDs struct {
	mu sync.Mutex
	n  int
}

// Reset counts from 1 again.
func (c *CountedIDs) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = 0
}

// NewID implements gates.IDSource.
func (c *CountedIDs) NewID(prefix string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return fmt.Sprintf("%s_%04d", prefix, c.n), nil
}

// Pinned returns the definition a run on t is given under pol, as verdictd gives it: t itself,
// or, when pol pins the tool to another definition, its bare name and the pin's error (Hold
// then says so in the record).
func Pinned(pol *policy.Policy, server string, t gates.Tool) (gates.Tool, error) {
	d, err := gates.ToolDigest(t)
	if err != nil {
		return t, nil // a definition the engine cannot read ends in its own repair
	}
	if perr := pol.CheckPin(server, t.Name, d); perr != nil {
		return gates.Tool{Name: t.Name}, perr
	}
	return t, nil
}

// Inline returns the definition a run on t, a tool pol's server lists itself, is given, as
// verdictd gives it: t, or its bare name and why verdictd cannot use it (its Err, or its pin's
// error), which Hold then says in the record.
func Inline(pol *policy.Policy, server string, t policy.InlineTool) (gates.Tool, error) {
	if t.Err != nil {
		return gates.Tool{Name: t.Name}, fmt.Errorf("tool definition unavailable: %w", t.Err)
	}
	if err := pol.CheckPin(server, t.Name, t.Digest); err != nil {
		return gates.Tool{Name: t.Name}, err
	}
	return gates.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}, nil
}

// Hold marks rec as verdictd does a run on a tool without a definition it can use (the error
// of Pinned or Inline): one its pin held back waits for the operator's review of the
// definition (definition_unpinned), not for a definition; another ends in the repair of its
// definition, saying why.
func Hold(rec *api.Record, held error) {
	if held == nil {
		return
	}
	rec.ToolSchemaDigest = nil // no definition binds the run
	if rec.Gate.Kind == api.GateSchemaUnsupported {
		rec.Gate.Detail = held.Error()
		if _, pinned := errors.AsType[*policy.PinError](held); pinned {
			rec.Gate.Kind = api.GateDefinitionUnpinned
		}
	}
}
