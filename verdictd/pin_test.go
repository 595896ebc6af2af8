package verdictd

import (
	"context"
	"strings"
	"testing"
)

// A tool whose listed definition is not its pin ends in definition_repair with gate
// definition_unpinned, and no verdict; pinning the listed digest restores it.
func TestPinnedToolChanged(t *testing.T) {
	wrong := "sha256:" + strings.Repeat("0", 64)
	e := newEnv(t, envOpts{policy: bankPolicy + "pins:\n  bank:\n    tools: {transfer: \"" + wrong + "\"}\n"})
	rec := e.preflight(landlord())
	if rec.Outcome != "definition_repair" || rec.Gate.Kind != "definition_unpinned" || !strings.Contains(rec.Gate.Detail, "pinned "+wrong) {
		t.Fatalf("outcome %s gate %s %q", rec.Outcome, rec.Gate.Kind, rec.Gate.Detail)
	}
	if v := e.metric(`verdictd_pin_refusals_total{server="bank"}`); v != 1 {
		t.Errorf("verdictd_pin_refusals_total = %v, want 1", v)
	}
	// The operator pins what is listed now.
	listed, ok := e.svc.snap.Load().catalog.Lookup("bank", "transfer")
	if !ok {
		t.Fatal("transfer not listed")
	}
	e.writePolicy(strings.Replace(bankPolicy, `"2026-11-30.1"`, `"2026-11-30.2"`, 1)+"pins:\n  bank:\n    tools: {transfer: \""+listed.Digest+"\"}\n", "")
	if err := e.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := e.preflight(landlord()); rec.Outcome == "definition_repair" {
		t.Fatalf("after re-pinning: %s %s %s", rec.Outcome, rec.Gate.Kind, rec.Gate.Detail)
	}
}
