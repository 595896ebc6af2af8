package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/verdictgate/verdict/canonical"
)

// Tool is one tool as the server listed it, kept as raw JSON so nothing
// is altered between the wire and the digest.
type Tool struct {
	Server      string          // the deployment's server id, never the server's own name
	Name        string          // decoded name
	Description string          // decoded description ("" if absent)
	InputSchema json.RawMessage // exact inputSchema bytes; nil if absent
	Annotations json.RawMessage // exact annotations bytes; nil if absent. Self-reported hints: never trust them to relax a check.
	Raw         json.RawMessage // the whole definition as listed

	// Digest is the docs/api.md "tsd" of the definition; see
	// [DefinitionDigest]. It is "" when Err is set.
	Digest string
	// Err says why the definition cannot be used: it has no canonical
	// form (duplicate keys, invalid UTF-8, a number no double denotes
	// exactly), a field has the wrong type, or the name is listed twice.
	// A tool with Err must be treated as a definition to repair, never
	// as one with no constraints.
	Err error
}

// DefinitionDigest returns the tool definition digest a verdict binds;
// see [canonical.ToolDefinitionDigest], which it is.
func DefinitionDigest(name, description string, inputSchema json.RawMessage) (string, error) {
	return canonical.ToolDefinitionDigest(name, description, inputSchema)
}

// parseTool reads one listed definition. The whole definition must have a
// canonical form first, so that the decoded name and description are
// exactly what the server sent (encoding/json would silently repair
// invalid UTF-8 and take the last of two duplicate keys).
func parseTool(server string, raw json.RawMessage) Tool {
	t := Tool{Server: server, Raw: raw}
	var f struct {
		Name        json.RawMessage `json:"name"`
		Description json.RawMessage `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Err = fmt.Errorf("tool definition: %w", err)
		return t
	}
	// Best effort, so a broken definition can still be reported by name.
	_ = json.Unmarshal(f.Name, &t.Name)
	if err := canonical.Validate(raw); err != nil {
		t.Err = fmt.Errorf("tool definition: %w", err)
		return t
	}
	if err := stringField(f.Name, &t.Name); err != nil || t.Name == "" {
		t.Err = errors.New("tool definition: name must be a non-empty string")
		return t
	}
	if f.Description != nil && !isNull(f.Description) {
		if err := stringField(f.Description, &t.Description); err != nil {
			t.Err = errors.New("tool definition: description must be a string")
			return t
		}
	}
	if f.InputSchema != nil && !isNull(f.InputSchema) {
		t.InputSchema = f.InputSchema
	}
	if f.Annotations != nil && !isNull(f.Annotations) {
		t.Annotations = f.Annotations
	}
	d, err := DefinitionDigest(t.Name, t.Description, t.InputSchema)
	if err != nil {
		t.Err = fmt.Errorf("tool definition digest: %w", err)
		return t
	}
	t.Digest = d
	return t
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

func stringField(b json.RawMessage, dst *string) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '"' {
		return errors.New("not a string")
	}
	return json.Unmarshal(b, dst)
}

// Tools lists every tool of the server, following pagination. The result
// has one entry per listed definition in server order; a name listed more
// than once marks every copy with Err. Every page is a tools/list request
// the server answers on the current connection, whatever cache time
// (ttlMs) it set on earlier answers; a page answered any other way fails
// the listing, as does one past maxPages pages or maxItems tools. Close
// ends a listing in flight. A failed listing of a stdio server carries the
// tail of its standard error (see StderrTail).
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	l, err := c.list(ctx, false)
	if err != nil {
		return nil, err
	}
	return l.tools, nil
}

func markDuplicates(tools []Tool) {
	count := map[string]int{}
	for _, t := range tools {
		if t.Name != "" {
			count[t.Name]++
		}
	}
	for i := range tools {
		if count[tools[i].Name] > 1 {
			tools[i].Digest = ""
			tools[i].Err = fmt.Errorf("tool %q is listed %d times", tools[i].Name, count[tools[i].Name])
		}
	}
}

// ParseTools reads tool definitions had other than from a live listing (a saved tools/list
// answer) as a listing reads them: one Tool per definition, in order, each digested from its
// exact bytes, and a name given more than once marking every copy with Err.
func ParseTools(server string, defs []json.RawMessage) []Tool {
	tools := make([]Tool, 0, len(defs))
	for _, raw := range defs {
		tools = append(tools, parseTool(server, raw))
	}
	markDuplicates(tools)
	return tools
}
