package policytest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

// Kinds of coverage item.
const (
	KindTool      = "tool"      // a tool some step called
	KindField     = "field"     // an argument some step settled
	KindSource    = "source"    // an allowed source of a field that settled it (origin_source)
	KindRoute     = "route"     // an argument some step left unknown, with its route
	KindCondition = "condition" // a provider condition, seen met and seen unmet
	KindChecklist = "checklist" // a principal's checklist item of the policy, seen met and seen unmet
	KindApproval  = "approval"  // an approval some step saw given
)

// Item is one thing of the policy a case may exercise.
type Item struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Covered bool   `json:"covered"`
}

// Coverage is what of the policy (and the tool definitions it was tested with) the cases
// exercised: every tool called; every argument of a gated tool settled, and left unknown (its
// route); every allowed source a field names settling it; every condition and policy
// checklist item both met and unmet; every approval (confirm fields, [Verify] labels, reviewed
// drafts, the console) given.
type Coverage struct {
	items map[string]*Item
}

func key(kind, name string) string { return kind + "\x00" + name }

func newCoverage(pol *policy.Policy) *Coverage {
	c := &Coverage{items: map[string]*Item{}}
	for k, t := range pol.Tools {
		c.tool(k, t, nil)
	}
	for id, p := range pol.Principals {
		for _, it := range p.UserChecklist {
			c.add(KindChecklist, id+":"+it.ID+" "+checkMet)
			c.add(KindChecklist, id+":"+it.ID+" "+checkUnmet)
		}
	}
	// The inline tools as a run reads them: one verdictd cannot use has no schema to cover.
	for id, tools := range pol.InlineTools() {
		for name, t := range tools {
			if t.Err == nil {
				c.tool(id+"/"+name, pol.Tools[id+"/"+name], &gates.Tool{Name: name, InputSchema: t.InputSchema})
			}
		}
	}
	return c
}

func (c *Coverage) add(kind, name string) {
	if _, ok := c.items[key(kind, name)]; !ok {
		c.items[key(kind, name)] = &Item{Kind: kind, Name: name}
	}
}

func (c *Coverage) mark(kind, name string) {
	if it := c.items[key(kind, name)]; it != nil {
		it.Covered = true
	}
}

// addDefinitions adds the items of the tools a test file defines.
func (c *Coverage) addDefinitions(pol *policy.Policy, f *File) error {
	for srv, tools := range f.tools {
		switch sv := pol.Servers[srv]; {
		case sv == nil:
			return fmt.Errorf("%s: servers.%s: the policy has no server %q", f.path, srv, srv)
		case sv.ToolsFrom == nil:
			// verdictd decides on the policy's own definitions: a test on others would pass
			// where production refuses.
			return fmt.Errorf("%s: servers.%s: the policy lists the tools of %q itself; a test runs on those", f.path, srv, srv)
		}
		for name, d := range tools {
			c.tool(srv+"/"+name, pol.Tools[srv+"/"+name], &d)
		}
	}
	return nil
}

// tool adds the items of one tool: the tool, and for a gated one its arguments (the policy's
// fields and, with the definition, the schema's properties), sources, conditions and approvals.
func (c *Coverage) tool(k string, t *policy.Tool, d *gates.Tool) {
	c.add(KindTool, k)
	if t.EffectiveClass() != policy.Irreversible {
		return
	}
	fields := map[string]bool{}
	if t != nil {
		for name := range t.Fields {
			fields[name] = true
		}
	}
	if d != nil {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(d.InputSchema, &schema) == nil {
			for name := range schema.Properties {
				fields[name] = true
			}
		}
		if labels, err := policy.ParseLabels(d.Description); err == nil {
			for _, v := range labels.Verify {
				c.add(KindApproval, k+":"+v.ID)
			}
		}
	}
	for name := range fields {
		c.add(KindField, k+"."+name)
		c.add(KindRoute, k+"."+name)
		if t.IsDrafted(name) {
			c.add(KindApproval, k+":"+name+" (reviewed draft)")
			continue
		}
		f := t.Field(name)
		if f == nil {
			continue
		}
		if f.Confirm {
			c.add(KindApproval, k+":confirm:"+name)
		}
		for _, s := range f.AllowedSources {
			if s == api.SourceMeasuredData && t.Measurements[name] == nil || s == api.SourceEvaluation {
				continue // nothing can settle the field from there
			}
			c.add(KindSource, k+"."+name+" from "+string(s))
		}
	}
	if t == nil {
		return
	}
	for _, cond := range t.Conditions {
		c.add(KindCondition, k+":"+cond.ID+" "+checkMet)
		c.add(KindCondition, k+":"+cond.ID+" "+checkUnmet)
	}
	if t.ApprovalRule().OutOfBand() {
		c.add(KindApproval, k+":console")
	}
}

// observe marks what one record exercised.
func (c *Coverage) observe(pol *policy.Policy, rec *api.Record) {
	k := rec.Server + "/" + rec.Tool
	c.mark(KindTool, k)
	t := pol.Tool(rec.Server, rec.Tool)
	for _, s := range rec.Slots {
		switch s.Kind {
		case api.KindValue:
			switch {
			case s.Status == api.StatusKnown:
				c.mark(KindField, k+"."+s.SlotID)
				if s.OriginSource != nil {
					c.mark(KindSource, k+"."+s.SlotID+" from "+string(*s.OriginSource))
					if *s.OriginSource == api.SourceReviewedDraft {
						c.mark(KindApproval, k+":"+s.SlotID+" (reviewed draft)")
					}
				}
			case s.Status == api.StatusUnknown && s.Route != nil:
				c.mark(KindRoute, k+"."+s.SlotID)
			}
		case api.KindCondition:
			if s.Status == api.StatusKnown && s.Met != nil {
				c.mark(KindCondition, k+":"+s.SlotID+" "+metWord(*s.Met))
			}
		case api.KindApproval:
			if s.Status == api.StatusKnown {
				c.mark(KindApproval, k+":"+s.SlotID)
			}
		}
		if s.Status == api.StatusKnown && s.Source != nil && *s.Source == api.SourceConsoleApproval && t.ApprovalRule().OutOfBand() {
			c.mark(KindApproval, k+":console")
		}
	}
	for _, it := range rec.UserChecklist {
		if it.Status == api.StatusKnown && it.Met != nil {
			c.mark(KindChecklist, rec.Principal+":"+it.ItemID+" "+metWord(*it.Met))
		}
	}
}

func metWord(met bool) string {
	if met {
		return checkMet
	}
	return checkUnmet
}

// Items returns every item, by kind in the documented order, then by name.
func (c *Coverage) Items() []Item {
	order := []string{KindTool, KindField, KindSource, KindRoute, KindCondition, KindChecklist, KindApproval}
	out := make([]Item, 0, len(c.items))
	for _, k := range slices.Sorted(maps.Keys(c.items)) {
		out = append(out, *c.items[k])
	}
	slices.SortStableFunc(out, func(a, b Item) int { return slices.Index(order, a.Kind) - slices.Index(order, b.Kind) })
	return out
}

// Percent is the share of items covered; 100 when there is nothing to cover.
func (c *Coverage) Percent() float64 {
	if len(c.items) == 0 {
		return 100
	}
	n := 0
	for _, it := range c.items {
		if it.Covered {
			n++
		}
	}
	return 100 * float64(n) / float64(len(c.items))
}
