package canonical

import (
	"bytes"
	"encoding/json"
)

// ToolDefinitionDigest returns the tool definition digest a verdict binds
// (docs/api.md "tsd"): "sha256:" and the hex SHA-256 of the RFC 8785 form
// of {"name", "description", "inputSchema"}. All three members are always
// present: an absent description counts as "" and an absent inputSchema as
// null, so a tool without a schema never digests like one with an empty
// schema. inputSchema is taken as JSON text, never through float64.
//
// The gate that signs a verdict and the executor that checks it both call
// this one function, so the two sides agree byte for byte.
func ToolDefinitionDigest(name, description string, inputSchema json.RawMessage) (string, error) {
	schema := inputSchema
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage("null")
	}
	return Digest(map[string]any{
		"name":        name,
		"description": description,
		"inputSchema": schema,
	})
}
