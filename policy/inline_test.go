package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInlineTools reads inline definitions as verdictd decides on them: a usable one has its
// digest, and one that cannot be used is kept, with why, under its name or its place.
func TestInlineTools(t *testing.T) {
	const pay = `{"name": "pay", "inputSchema": {"type": "object"}}`
	tests := []struct {
		name  string
		tools []string
		key   string // the tool read
		err   string // its Err; "" when usable
	}{
		{"a usable definition", []string{pay}, "pay", ""},
		{"a duplicated tool", []string{pay, pay}, "pay", `tool "pay" is listed more than once`},
		{"a definition that is not an object", []string{pay, `"pay"`}, "#1",
			"tool definition is not a JSON object: json: cannot unmarshal string into Go value of type map[string]json.RawMessage"},
		{"a definition with no name", []string{`{"Name": "pay"}`}, "#0", "tool definition has no name"},
		{"a description that is not a string", []string{`{"name": "pay", "description": 1}`}, "pay", "description is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Servers: map[string]*Server{"bank": {}, "remote": {ToolsFrom: &ToolsFrom{URL: "http://127.0.0.1:9/mcp"}}}}
			for _, d := range tt.tools {
				p.Servers["bank"].Tools = append(p.Servers["bank"].Tools, json.RawMessage(d))
			}
			got := p.InlineTools()
			if _, ok := got["remote"]; ok {
				t.Fatalf("a tools_from server read inline: %+v", got)
			}
			tool, ok := got["bank"][tt.key]
			switch {
			case !ok:
				t.Fatalf("no tool %q in %+v", tt.key, got["bank"])
			case tt.err == "" && (tool.Err != nil || !strings.HasPrefix(tool.Digest, "sha256:")):
				t.Fatalf("got %v, digest %q", tool.Err, tool.Digest)
			case tt.err != "" && (tool.Err == nil || tool.Err.Error() != tt.err || tool.Digest != ""):
				t.Fatalf("got %v, digest %q, want %q", tool.Err, tool.Digest, tt.err)
			}
		})
	}
}
