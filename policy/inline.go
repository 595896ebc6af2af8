package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/verdictgate/verdict/canonical"
)

// InlineTool is one tool definition a server lists in the policy itself (Server.Tools), read
// as verdictd reads it.
type InlineTool struct {
	Name        string          // decoded name; "#i", its place in the list, when it has none
	Description string          // decoded description ("" if absent)
	InputSchema json.RawMessage // exact inputSchema bytes; nil if absent
	Annotations json.RawMessage // exact annotations bytes; nil if absent
	Raw         json.RawMessage // the whole definition as the policy writes it
	// Digest is the definition's canonical.ToolDefinitionDigest; "" when Err is set.
	Digest string
	// Err says why the definition cannot be used. It is kept, never dropped: a preflight on it
	// is a definition repair, never a tool without constraints.
	Err error
}

// InlineTools reads the tools the policy's servers list themselves, by server and tool name;
// a server whose tools are listed from it (tools_from) is absent. verdictd, `verdictd policy
// test` and `verdictd policy replay` all decide on these, so that none of them uses a
// definition another refuses. A tool listed more than once is kept once, with Err set.
func (p *Policy) InlineTools() map[string]map[string]InlineTool {
	out := map[string]map[string]InlineTool{}
	for id, sv := range p.Servers {
		if sv.ToolsFrom != nil {
			continue
		}
		tools := map[string]InlineTool{}
		for i, raw := range sv.Tools {
			t := inlineDefinition(raw)
			if t.Name == "" {
				t.Name = fmt.Sprintf("#%d", i)
			}
			if _, dup := tools[t.Name]; dup {
				t.Err = fmt.Errorf("tool %q is listed more than once", t.Name)
				t.Digest = ""
			}
			tools[t.Name] = t
		}
		out[id] = tools
	}
	return out
}

func inlineDefinition(raw json.RawMessage) InlineTool {
	t := InlineTool{Raw: raw}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Err = fmt.Errorf("tool definition is not a JSON object: %w", err)
		return t
	}
	if err := json.Unmarshal(m["name"], &t.Name); err != nil || t.Name == "" {
		t.Err = errors.New("tool definition has no name")
		return t
	}
	if d, ok := m["description"]; ok && !bytes.Equal(d, []byte("null")) {
		if err := json.Unmarshal(d, &t.Description); err != nil {
			t.Err = errors.New("description is not a string")
			return t
		}
	}
	t.InputSchema, t.Annotations = m["inputSchema"], m["annotations"]
	// An error leaves no digest.
	t.Digest, t.Err = canonical.ToolDefinitionDigest(t.Name, t.Description, t.InputSchema)
	return t
}
