package replay

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/audit"
)

// TestReplayInlineDefinitions replays captured transfers under candidates that list the bank's
// tools inline, in ways verdictd refuses to use: each call is decided on the definition
// verdictd decides on, never on another one.
func TestReplayInlineDefinitions(t *testing.T) {
	pol, recs := capturedTransfers(t, 1)
	b, err := os.ReadFile(filepath.Join("..", "examples", "bank", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []json.RawMessage
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	var transfer string
	for _, raw := range listed {
		if strings.Contains(string(raw), `"name": "transfer"`) {
			transfer = string(raw)
		}
	}
	noName := strings.Replace(transfer, `"name"`, `"Name"`, 1)
	tests := []struct {
		name        string
		tools       []string
		after, gate string // "" when the outcome stays
	}{
		{"the definition listed once", []string{transfer}, "", ""},
		{"a duplicated tool", []string{transfer, transfer}, api.OutcomeDefinitionRepair, api.GateSchemaUnsupported},
		{"a definition that is not an object", []string{`"transfer"`}, OutcomeUnknownTool, OutcomeUnknownTool},
		{"a definition that is not an object, beside the tool's", []string{`"transfer"`, transfer}, "", ""},
		{"a definition with no name", []string{noName}, OutcomeUnknownTool, OutcomeUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			candidate := *pol
			candidate.Servers = maps.Clone(pol.Servers)
			bank := *pol.Servers["bank"]
			bank.ToolsFrom, bank.Tools = nil, nil
			for _, d := range tt.tools {
				bank.Tools = append(bank.Tools, json.RawMessage(d))
			}
			candidate.Servers["bank"] = &bank
			r, err := New(&candidate)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := r.Run(t.Context(), []audit.Source{records(recs)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Replayed != 1 {
				t.Fatalf("counts %+v", rep)
			}
			if tt.after == "" {
				if len(rep.Calls) != 0 {
					t.Fatalf("changed: %+v", rep.Calls)
				}
				return
			}
			if len(rep.Calls) != 1 || rep.Calls[0].After != tt.after || rep.Calls[0].Gate != tt.gate {
				t.Fatalf("calls %+v, want %s (%s)", rep.Calls, tt.after, tt.gate)
			}
		})
	}
}
