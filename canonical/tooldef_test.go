package canonical

import (
	"encoding/json"
	"testing"
)

// The expected digests are those pinned in testdata/digests, computed
// outside Go from the canonical forms written here.
func TestToolDefinitionDigest(t *testing.T) {
	tests := []struct {
		name, desc, schema, want string
	}{
		{"t", "d", `{ "type": "object", "required": [] }`, `{"description":"d","inputSchema":{"required":[],"type":"object"},"name":"t"}`},
		{"t", "", "", `{"description":"","inputSchema":null,"name":"t"}`},
		{"t", "", " null ", `{"description":"","inputSchema":null,"name":"t"}`},
		{"t", "", `{"maximum":1.0}`, `{"description":"","inputSchema":{"maximum":1},"name":"t"}`},
	}
	for _, tt := range tests {
		got, err := ToolDefinitionDigest(tt.name, tt.desc, json.RawMessage(tt.schema))
		if err != nil {
			t.Fatal(err)
		}
		if want := pinnedDigest(t, tt.want); got != want {
			t.Errorf("ToolDefinitionDigest(%q, %q, %s) = %s, want %s, the digest of %s", tt.name, tt.desc, tt.schema, got, want, tt.want)
		}
	}
	if _, err := ToolDefinitionDigest("t", "", json.RawMessage(`{"maximum":9007199254740993}`)); !IsCode(err, CodeNumberNotExact) {
		t.Errorf("inexact number: %v", err)
	}
}
