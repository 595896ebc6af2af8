package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// policyDocument writes p back in the policy language (JSON, being YAML): every setting the
// loader read, in the key that sets it, defaults left out where the loader would refuse them.
func policyDocument(p *Policy) map[string]any {
	doc := map[string]any{"policy_version": p.Version}
	servers := map[string]any{}
	for id, s := range p.Servers {
		m := map[string]any{}
		if s.Audience != nil {
			m["audience"] = s.Audience
		}
		if w := s.Withhold; w.Resources != nil || w.Prompts != nil {
			wm := map[string]any{}
			if w.Resources != nil {
				wm["resources"] = w.Resources
			}
			if w.Prompts != nil {
				wm["prompts"] = w.Prompts
			}
			m["withhold"] = wm
		}
		switch {
		case s.ToolsFrom != nil:
			from := map[string]any{}
			if s.ToolsFrom.Command != nil {
				from["command"] = s.ToolsFrom.Command
			}
			if s.ToolsFrom.URL != "" {
				from["url"] = s.ToolsFrom.URL
			}
			m["tools_from"] = from
		default:
			m["tools"] = append([]json.RawMessage{}, s.Tools...)
		}
		servers[id] = m
	}
	doc["servers"] = servers
	if p.Pins != nil {
		pins := map[string]any{}
		for id, pin := range p.Pins {
			m := map[string]any{}
			if pin.All {
				m["all"] = true
			}
			if len(pin.Tools) > 0 {
				m["tools"] = pin.Tools
			}
			pins[id] = m
		}
		doc["pins"] = pins
	}
	tools := map[string]any{}
	for k, t := range p.Tools {
		tools[k] = toolDocument(t)
	}
	doc["tools"] = tools
	principals := map[string]any{}
	for id, pr := range p.Principals {
		m := map[string]any{}
		if pr.UserChecklist != nil {
			var items []any
			for _, it := range pr.UserChecklist {
				im := map[string]any{"id": it.ID, "kind": it.Kind}
				if it.Description != "" {
					im["description"] = it.Description
				}
				if it.Expr != "" {
					im["expr"] = it.Expr
				}
				items = append(items, im)
			}
			m["user_checklist"] = items
		}
		principals[id] = m
	}
	doc["principals"] = principals
	return doc
}

func toolDocument(t *Tool) map[string]any {
	m := map[string]any{}
	set := func(k string, v []string) {
		if v != nil {
			m[k] = v
		}
	}
	if t.Class != "" {
		m["class"] = t.Class
	}
	set("actions", t.Actions)
	set("when_cases", t.WhenCases)
	set("pending_at_trigger", t.PendingAtTrigger)
	set("notices", t.Notices)
	set("drafted", t.Drafted)
	if t.Approver != nil {
		m["approver"] = map[string]any{"webhook": t.Approver.Webhook}
	}
	if t.Fields != nil {
		fields := map[string]any{}
		for name, f := range t.Fields {
			fm := map[string]any{}
			if f.AllowedSources != nil {
				fm["allowed_sources"] = f.AllowedSources
			}
			if f.Confirm {
				fm["confirm"] = true
			}
			if f.Question != "" {
				fm["question"] = f.Question
			}
			if f.AllowHiddenCharacters {
				fm["allow_hidden_characters"] = true
			}
			fields[name] = fm
		}
		m["fields"] = fields
	}
	if t.Measurements != nil {
		ms := map[string]any{}
		for name, x := range t.Measurements {
			mm := map[string]any{}
			if x.HTTP != nil {
				h := map[string]any{"url": x.HTTP.URL}
				if x.HTTP.Pointer != "" {
					h["pointer"] = x.HTTP.Pointer
				}
				mm["http"] = h
			}
			if x.MCP != nil {
				c := map[string]any{"server": x.MCP.Server, "tool": x.MCP.Tool}
				if x.MCP.Args != nil {
					c["args"] = x.MCP.Args
				}
				if x.MCP.Pointer != "" {
					c["pointer"] = x.MCP.Pointer
				}
				mm["mcp"] = c
			}
			if x.Timeout != 0 {
				mm["timeout"] = x.Timeout.String()
			}
			ms[name] = mm
		}
		m["measurements"] = ms
	}
	if t.Conditions != nil {
		var cs []any
		for _, c := range t.Conditions {
			cm := map[string]any{"id": c.ID, "expr": c.Expr}
			if c.Description != "" {
				cm["description"] = c.Description
			}
			cs = append(cs, cm)
		}
		m["conditions"] = cs
	}
	if r := t.Recurrence; r != nil {
		rm := map[string]any{}
		if r.Count != 0 {
			rm["count"] = r.Count
		}
		if r.Interval != 0 {
			rm["interval"] = r.Interval.String()
		}
		m["recurrence"] = rm
	}
	if a := t.Approval; a != nil {
		am := map[string]any{"channels": a.Channels}
		if a.FourEyes {
			am["four_eyes"] = true
		}
		if a.Group != "" {
			am["group"] = a.Group
		}
		if a.Readers != nil {
			am["readers"] = a.Readers
		}
		if a.OutOfBand() {
			am["timeout"] = a.Timeout.String()
			am["use_within"] = a.UseWithin.String()
		}
		if a.Webhook != "" {
			am["webhook"] = a.Webhook
		}
		if a.Allows(ChannelWebhook) {
			am["webhook_timeout"] = a.WebhookTimeout.String()
		}
		m["approval"] = am
	}
	if t.Relay != nil {
		m["relay"] = map[string]any{"allow_secrets": t.Relay.AllowSecrets}
	}
	return m
}

// comparable clears from p what two loads of one policy cannot share: checked expressions (their
// compile errors are kept as text), and where each issue sits in its file.
func comparable(p *Policy) *Policy {
	text := func(err error) error {
		if err == nil {
			return nil
		}
		return errors.New(err.Error())
	}
	for _, t := range p.Tools {
		for _, c := range t.Conditions {
			c.AST, c.CompileErr = nil, text(c.CompileErr)
		}
		for _, m := range t.Measurements {
			m.Err = text(m.Err)
		}
	}
	for _, pr := range p.Principals {
		for _, it := range pr.UserChecklist {
			it.AST, it.CompileErr = nil, text(it.CompileErr)
		}
	}
	for i := range p.Issues {
		p.Issues[i].Line, p.Issues[i].Column = 0, 0
	}
	return p
}

// checkRoundTrip parses data and, when it is a policy, writes it back and parses that: the
// second load must be the first.
func checkRoundTrip(t *testing.T, data []byte) {
	p, err := Parse(data)
	if err != nil {
		return
	}
	out, err := json.Marshal(policyDocument(p))
	if err != nil {
		t.Fatalf("the policy does not encode: %v", err)
	}
	again, err := Parse(out)
	if err != nil {
		t.Fatalf("the policy written back does not load: %v\n%s", err, out)
	}
	if a, b := comparable(p), comparable(again); !reflect.DeepEqual(a, b) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		t.Fatalf("the policy written back loads differently:\n%s\n%s\nwritten back as %s", ja, jb, out)
	}
}

// Every policy the project ships or tests with survives being written back.
func TestPolicyRoundTrip(t *testing.T) {
	files := policyFiles(t)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data); err != nil {
				t.Fatalf("does not load: %v", err)
			}
			checkRoundTrip(t, data)
		})
	}
}

// policyFiles are the policies of the examples and the package's test data.
func policyFiles(t testing.TB) []string {
	files := []string{filepath.Join("testdata", "bank.yaml"), filepath.Join("..", "examples", "policy.yaml"),
		filepath.Join("..", "examples", "agent-ts", "policy.yaml"), filepath.Join("..", "deploy", "etc", "policy.yaml")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	return files
}
