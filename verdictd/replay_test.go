package verdictd

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/replay"
)

// TestReplayRecordedRun replays the records of a run of the bank stack (a real bank MCP
// server, real bbolt, read back through the records export) under candidate policies. Under
// the policy in force nothing changes and every captured record is replayed; under one that
// reclassifies get_balance as irreversible and no longer takes transfer's to_account from the
// instruction, the report lists exactly the calls whose outcome changes: the balance read and
// the transfer whose recipient came from the user's words, both now refused (the transfer's
// first preflight, which asked for a confirmation and would now ask for the recipient, stays
// ask_user and is not listed); the transfer whose recipient the user answered stays as it
// was. A
// record kept before capture was on is counted as not replayable. A deferred transfer and its
// trigger run are replayed too, and stay as they were.
func TestReplayRecordedRun(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOpts{})
	balance := func(conv string) *record {
		return e.preflight(map[string]any{"principal": "u_01", "conversation_id": conv, "server": "bank", "tool": "get_balance",
			"instruction": []map[string]any{{"text": "what is the balance of 1102534471", "trust": "user"}},
			"candidates":  []map[string]any{{"field": "account", "segment": 0, "span": []int{24, 34}, "value": "1102534471"}}})
	}
	uncaptured := balance("c_0")
	e.stop()
	e.cfg.Records.CaptureRequests = true
	e.start()

	e.issue(ctx) // three records: asks to_account, asks confirm_transfer, verdict_issued
	read := balance("c_1")
	list := e.preflight(map[string]any{"principal": "u_01", "server": "bank", "tool": "list_transactions",
		"instruction": []map[string]any{{"text": "list my transactions", "trust": "user"}}})
	// A transfer whose recipient is in the user's words: confirmed, then issued.
	grounded := func(answers ...map[string]any) map[string]any {
		r := landlord(answers...)
		r["conversation_id"] = "c_2"
		r["instruction"] = []map[string]any{{"text": "send money to 110-222-333, 500,000 won", "trust": "user"}}
		r["candidates"] = []map[string]any{{"field": "amount", "segment": 0, "span": []int{27, 34}, "value": 500000},
			{"field": "to_account", "segment": 0, "span": []int{14, 25}, "value": "110-222-333"}}
		return r
	}
	confirm := e.preflight(grounded()).question("confirm_transfer")
	if confirm.QuestionID == "" {
		t.Fatal("confirm_transfer not asked")
	}
	var shown any
	json.Unmarshal(confirm.Value, &shown)
	groundedIssued := e.preflight(grounded(map[string]any{"question_id": confirm.QuestionID, "approved": true, "value": shown}))
	if groundedIssued.Outcome != "verdict_issued" {
		t.Fatalf("outcome %s\n%s", groundedIssued.Outcome, groundedIssued.raw)
	}

	// A scheduled transfer, deferred, then triggered: the trigger run's request is the one
	// expanded from the deferred record.
	d := deferIntent(t, e, "scheduled", "c_3")
	if _, tr, code := e.trigger(d.actionKey); tr == nil || tr.Outcome != "verdict_issued" {
		t.Fatalf("trigger: %v %s", tr, code)
	}
	total := len(e.records())

	src, err := audit.ParseSource(e.srv.URL, audit.SourceOptions{Token: adminToken, Unmasked: true})
	if err != nil {
		t.Fatal(err)
	}
	candidate := func(edit func(string) string) *policy.Policy {
		t.Helper()
		from := `{command: ["` + strings.Join(e.bankArgs, `", "`) + `"]}`
		pol, err := policy.Parse([]byte(edit(strings.ReplaceAll(bankPolicy, "%BANK%", from))))
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	run := func(pol *policy.Policy, opts replay.Options) *replay.Report {
		t.Helper()
		r, err := replay.New(pol)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(ctx, []audit.Source{src}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	type change struct{ id, change, before string }
	changes := func(rep *replay.Report) []change {
		var out []change
		for _, c := range rep.Calls {
			out = append(out, change{c.RecordID, c.Change, c.Before})
		}
		return out
	}

	same := run(candidate(func(s string) string { return s }), replay.Options{})
	if same.Records != total || same.Replayed != total-1 || same.NotReplayable != 1 || same.Changed != 0 || len(same.Calls) != 0 {
		t.Fatalf("under the policy in force: %+v", same)
	}
	if s := same.Skipped[0]; s.RecordID != uncaptured.RecordID || s.Reason != replay.NotCaptured {
		t.Errorf("not replayable: %+v", s)
	}

	tightened := candidate(func(s string) string {
		s = strings.Replace(s, "to_account: {allowed_sources: [user_answer, instruction, pre_set_data, prior_state]}",
			"to_account: {allowed_sources: [user_answer, pre_set_data, prior_state]}", 1)
		return strings.Replace(s, "  bank/get_balance:\n    class: read", "  bank/get_balance:\n    class: irreversible", 1)
	})
	rep := run(tightened, replay.Options{})
	want := []change{{read.RecordID, replay.ChangeRefused, "not_gated"}, {groundedIssued.RecordID, replay.ChangeRefused, "verdict_issued"}}
	if got := changes(rep); !slices.Equal(got, want) {
		t.Fatalf("changed calls %+v, want %+v\nreport: %+v", got, want, rep)
	}
	if rep.Records != total || rep.Replayed != total-1 || rep.Changed != 2 {
		t.Errorf("counts: %+v", rep)
	}
	if c := rep.Calls[1]; c.After != "ask_user" || !slices.Equal(c.Asked, []string{"to_account"}) {
		t.Errorf("the grounded transfer now: %+v", c)
	}
	for _, ts := range rep.Tools {
		wantChanged := map[string]int{"get_balance": 1, "transfer": 1}[ts.Tool]
		if ts.Changed != wantChanged || ts.NowRefused != wantChanged {
			t.Errorf("summary of %s: %+v", ts.Tool, ts)
		}
	}

	// The calls the candidate would now let run are listed first; --tool and --since select.
	loosened := candidate(func(s string) string {
		return strings.Replace(s, "  bank/list_transactions:\n    class: read", "  bank/list_transactions:\n    class: irreversible", 1)
	})
	if got := changes(run(loosened, replay.Options{Tools: []string{"bank/list_transactions"}})); len(got) != 1 || got[0].id != list.RecordID {
		t.Errorf("--tool bank/list_transactions: %+v", got)
	}
	if rep := run(tightened, replay.Options{Tools: []string{"get_balance"}}); rep.Records != 2 || rep.Changed != 1 {
		t.Errorf("--tool get_balance: %+v", rep)
	}
	// The balance read of c_0 was decided before the service restarted.
	var at struct{ Timestamp time.Time }
	if err := json.Unmarshal(read.raw, &at); err != nil {
		t.Fatal(err)
	}
	if rep := run(tightened, replay.Options{Since: at.Timestamp, Tools: []string{"get_balance"}}); rep.Records != 1 || rep.NotReplayable != 0 {
		t.Errorf("--since %s --tool get_balance: %+v", at.Timestamp, rep)
	}
}
