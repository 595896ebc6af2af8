package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// TestReplayChanges replays captured transfers of the example policy under candidates made
// from it by one edit each: the outcome each comes to, how the change is classed, what it
// would now ask, and what the capture could not answer.
func TestReplayChanges(t *testing.T) {
	_, recs := capturedTransfers(t, 2)
	recs = append(recs, &store.Decision{DecisionMeta: store.DecisionMeta{RecordID: "rec_old", Outcome: "ask_user", Time: recs[0].Time},
		Record: []byte(`{"record_id":"rec_old","server":"bank","tool":"transfer","outcome":"ask_user"}`)})
	original, err := os.ReadFile(filepath.Join("..", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		edits       []string // old, new, old, new...
		after       string
		change      string
		asked       []string
		notCaptured []string
	}{
		{"the policy in force", nil, "", "", nil, nil},
		{"the transfer reclassified as a read", []string{"  bank/transfer:\n    class: irreversible", "  bank/transfer:\n    class: read"},
			"not_gated", ChangeAllowed, []string{}, nil},
		{"a tighter limit", []string{"args.amount <= 5000000", "args.amount <= 100000"}, "hold", ChangeOther, []string{}, nil},
		{"a condition reading a measurement the run did not take", []string{"args.amount <= 5000000", "args.amount <= measured.balance",
			"    conditions:\n", "    measurements:\n      balance: {http: {url: \"http://127.0.0.1:9/balance?account={{from_account}}\", pointer: \"/balance\"}}\n    conditions:\n"},
			"definition_repair", ChangeOther, []string{}, []string{"measurement balance"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := original
			for i := 0; i < len(tt.edits); i += 2 {
				if !bytes.Contains(src, []byte(tt.edits[i])) {
					t.Fatalf("the example policy has no %q", tt.edits[i])
				}
				src = bytes.Replace(src, []byte(tt.edits[i]), []byte(tt.edits[i+1]), 1)
			}
			pol, err := policy.Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			r, err := New(pol)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := r.Run(context.Background(), []audit.Source{records(recs)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Records != 3 || rep.Replayed != 2 || rep.NotReplayable != 1 || rep.Skipped[0].Reason != NotCaptured {
				t.Errorf("counts %+v", rep)
			}
			if tt.after == "" {
				if len(rep.Calls) != 0 {
					t.Fatalf("changed under the policy in force: %+v", rep.Calls)
				}
				return
			}
			if len(rep.Calls) != 2 {
				t.Fatalf("calls %+v", rep.Calls)
			}
			c := rep.Calls[0]
			if c.Before != "ask_user" || c.After != tt.after || c.Change != tt.change || !slices.Equal(c.Asked, tt.asked) ||
				!slices.Equal(c.NotCaptured, tt.notCaptured) {
				t.Errorf("call %+v", c)
			}
		})
	}
}
