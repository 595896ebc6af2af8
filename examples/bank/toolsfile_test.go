package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/canonical"
)

var updateTools = flag.Bool("update-tools", false, "write tools.json from the tools the server lists")

// TestToolsFile holds tools.json, the bank's tools as it lists them, to the server: the
// example policy's tests (examples/policy_test.yaml) run against that file, never against a
// live server, so a changed definition must change the file too.
func TestToolsFile(t *testing.T) {
	ledger, err := OpenLedger(filepath.Join(t.TempDir(), "bank.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1.0.0"}, nil)
	addTools(srv, ledger, knobs{}, access{})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if *updateTools {
		if err := os.WriteFile("tools.json", append(listed, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile("tools.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := canonical.Transform(listed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := canonical.Transform(file)
	if err != nil {
		t.Fatalf("tools.json: %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("tools.json is not what the server lists; run go test -run TestToolsFile -update-tools ./examples/bank\nlisted: %s", want)
	}
}
