// Package offline runs the preflight engine in process, apart from the world: the engine
// verdictd runs (gates.Engine with the CEL evaluator) on a set clock and counted ids, with
// tool definitions held back by the policy's pins as verdictd holds them. `verdictd policy
// test` (package policytest) and `verdictd policy replay` (package replay) decide with it.
package offline

import (
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

// Hold marks rec as verdictd does a run on a tool its pin held back (Pinned's error): it waits
// for the operator's review of the definition (definition_unpinned), not for a definition.
func Hold(rec *api.Record, held error) {
	if held != nil && rec.Gate.Kind == api.GateSchemaUnsupported {
		rec.Gate.Kind, rec.Gate.Detail = api.GateDefinitionUnpinned, held.Error()
		rec.ToolSchemaDigest = nil
	}
}
