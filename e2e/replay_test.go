package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// replayPolicy is inlinePolicy with a read beside the transfer.
const replayPolicy = inlinePolicy + `  pay/get_balance:
    class: read
`

// replayTools lists get_balance after the transfer, and opens the tools section.
const replayTools = `      - name: get_balance
        description: Read an account's balance.
        inputSchema:
          type: object
          properties:
            account: {type: string, minLength: 1, maxLength: 64}
          required: [account]
          additionalProperties: false
tools:
`

// TestPolicyReplayOnRecords runs a verdictd process with records.capture_requests on, sends it
// transfers (some grounded whole, which end in a verdict, some whose recipient is asked) and
// balance reads, and then runs verdictd policy replay, the real command, on its records: over
// HTTP while it runs, and on its bbolt file once it stopped. Under the policy in force nothing
// changes (exit 0); under one that reclassifies get_balance as irreversible and no longer takes
// transfer's to_account from the user's words, the report lists exactly the calls whose
// outcome changes — every balance read and every grounded transfer, now refused — and nothing
// else (exit 1).
func TestPolicyReplayOnRecords(t *testing.T) {
	pol := strings.Replace(replayPolicy, "tools:\n  pay/transfer:", replayTools+"  pay/transfer:", 1)
	g := newGateConfig(t, pol, map[string]any{"records": map[string]any{"capture_requests": true}})
	d := startVerdictd(t, g)
	c := newClient(g.addr, callerToken, 30*time.Second)
	post := func(body []byte) decisionReply {
		t.Helper()
		r := c.do(context.Background(), http.MethodPost, "/v1/preflight", body)
		var rep decisionReply
		if r.status != http.StatusOK || json.Unmarshal(r.body, &rep) != nil {
			t.Fatalf("preflight: %d %v %s", r.status, r.err, r.body)
		}
		return rep
	}
	var changes []string
	for i := range 6 {
		grounded := i%2 == 0
		rep := post(transferRequest(fmt.Sprintf("c%d", i), 1000+i, grounded))
		want := map[bool]string{true: "verdict_issued", false: "ask_user"}[grounded]
		if rep.Outcome != want {
			t.Fatalf("transfer %d: %s, want %s", i, rep.Outcome, want)
		}
		if grounded {
			changes = append(changes, rep.RecordID)
		}
		b, _ := json.Marshal(map[string]any{"principal": principal, "server": "pay", "tool": "get_balance",
			"instruction": []map[string]any{{"text": "balance of 1102534471", "trust": "user"}},
			"candidates":  []map[string]any{{"field": "account", "segment": 0, "span": []int{11, 21}, "value": "1102534471"}}})
		rep = post(b)
		if rep.Outcome != "not_gated" {
			t.Fatalf("balance %d: %s", i, rep.Outcome)
		}
		changes = append(changes, rep.RecordID)
	}

	candidate := filepath.Join(g.dir, "candidate.yaml")
	writeFile(t, candidate, strings.Replace(strings.Replace(pol,
		"  pay/get_balance:\n    class: read", "  pay/get_balance:\n    class: irreversible", 1),
		"    actions: [\"send money\"]\n", "    actions: [\"send money\"]\n    fields:\n      to_account: {allowed_sources: [user_answer, pre_set_data, prior_state]}\n", 1))
	inForce := filepath.Join(g.dir, "policy.yaml")
	tokenFile := filepath.Join(g.dir, "admin.token")
	writeFile(t, tokenFile, adminToken+"\n")
	replay := func(policy, src string, more ...string) (int, report) {
		t.Helper()
		args := append([]string{"policy", "replay", "--policy", policy, "--records", src, "--format", "json"}, more...)
		cmd := exec.Command(bins["verdictd"], args...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			ee, ok := errors.AsType[*exec.ExitError](err)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		var rep report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("replay %v: exit %d, %v\n%s\n%s", args, code, err, &out, &stderr)
		}
		return code, rep
	}
	check := func(name, src string, more ...string) {
		t.Helper()
		if code, rep := replay(inForce, src, more...); code != 0 || rep.Records != 12 || rep.Replayed != 12 || rep.Changed != 0 {
			t.Errorf("%s, the policy in force: exit %d, %+v", name, code, rep)
		}
		code, rep := replay(candidate, src, more...)
		var got []string
		for _, c := range rep.Calls {
			if c.Change != "now_refused" {
				t.Errorf("%s: %s is %s", name, c.RecordID, c.Change)
			}
			got = append(got, c.RecordID)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(changes))
		if code != 1 || !slices.Equal(got, want) || rep.Replayed != 12 {
			t.Errorf("%s, the candidate: exit %d, changed %v, want %v\n%+v", name, code, got, want, rep)
		}
	}
	check("over HTTP", "http://"+g.addr, "--token-file", tokenFile)
	d.stop(t)
	check("the bbolt file", filepath.Join(g.dataDir, "verdictd.db"))
}

// report is what the test reads of a replay's JSON report.
type report struct {
	Records  int `json:"records"`
	Replayed int `json:"replayed"`
	Changed  int `json:"changed"`
	Calls    []struct {
		RecordID string `json:"record_id"`
		Change   string `json:"change"`
	} `json:"calls"`
}
