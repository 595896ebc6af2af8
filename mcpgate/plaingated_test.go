package mcpgate_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/otlptest"
	"github.com/verdictgate/verdict/mcpgate"
)

// gatedBody is callBody with extra members (each `,"name":value`) in _meta.
func gatedBody(id, name, args, extra string) string {
	return strings.Replace(callBody(id, name, args), `"io.modelcontextprotocol/protocolVersion"`, extra[1:]+`,"io.modelcontextprotocol/protocolVersion"`, 1)
}

// grounded is the _meta members of a call whose arguments the user's words ground: said,
// with each argument's value (as written in said) located in it, and the action in it
// unless action is "".
func grounded(said, action string, values map[string]string) string {
	locs := map[string]any{}
	for field, v := range values {
		locs[field] = map[string]any{"segment": 0, "span": span(said, v)}
	}
	meta := map[string]any{
		"io.verdict/instruction": []map[string]any{{"text": said, "trust": "user", "origin": "chat"}},
		"io.verdict/locations":   locs,
	}
	if action != "" {
		meta["io.verdict/intent"] = map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": span(said, action)}}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		panic(err)
	}
	return "," + string(b[1:len(b)-1])
}

// recordIDs are the ids of the records verdictd and the executor write for a call, new on
// every call.
var recordIDs = regexp.MustCompile(`"(` + regexp.QuoteMeta(api.MetaRecordID) + `|` + regexp.QuoteMeta(api.MetaExecutionRecord) + `)":"[^"]*"`)

// sameGatedAnswer is sameAnswer with the record ids set aside too: the only members two
// answers to the same gated call may differ in are requestState (sealed with a fresh nonce)
// and io.verdict/record_id and io.verdict/execution_record (each call's own records).
func sameGatedAnswer(a, b answer) bool {
	a.body, b.body = recordIDs.ReplaceAllString(a.body, `"$1":"…"`), recordIDs.ReplaceAllString(b.body, `"$1":"…"`)
	return sameAnswer(a, b)
}

// gatedPolicy is the tests' policy with list_transactions gated as bench/gateload gates it:
// irreversible, every value from a source the call supplies, so that its call is settled
// without a question and executes.
const gatedPolicy = `  bank/list_transactions:
    class: irreversible
    actions: ["list transactions"]
    when_cases: [immediate]
    fields:
      account: {allowed_sources: [pre_set_data]}
      limit: {allowed_sources: [instruction]}
`

// gatedGateways runs verdictd and the executor on gatedPolicy in front of the tests' bank,
// and gateways in the test process, each served twice as newPlainGateway serves one: live
// (calling that verdictd), dead (whose verdictd URL answers nothing) and traced (with
// tracing on).
func gatedGateways(t *testing.T) (live, dead, traced *plainGateway) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs verdictd, the executor and the bank")
	}
	bank := bankStack(t)
	dir, err := os.MkdirTemp("", "mcpgate-plaingated-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bank.bankURL, bankLog: bank.bankLog}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
	policy = bytes.Replace(policy, []byte("  bank/list_transactions:\n    class: read\n"), []byte(gatedPolicy), 1)
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("verdictd.log")))
	}
	serve := func(edit func(raw map[string]any)) *plainGateway {
		dir := t.TempDir()
		raw := s.gatewayConfig(dir)
		raw["principals"].(map[string]any)["u_01"].(map[string]any)["pre_set_data"] = map[string]any{
			"from_account": "1102534471", "account": "1102534471"}
		raw["tools"].(map[string]any)["bank/list_transactions"] = map[string]any{"action_name_preset": "list transactions", "when_case": "immediate"}
		edit(raw)
		gw, _ := runGateway(t, dir, raw)
		fast, slow := httptest.NewServer(gw.Handler()), httptest.NewServer(mcpgate.LibraryHandler(gw))
		t.Cleanup(func() {
			fast.Close()
			slow.Close()
		})
		return &plainGateway{gw: gw, fast: fast.URL, slow: slow.URL}
	}
	live = serve(func(map[string]any) {})
	dead = serve(func(raw map[string]any) {
		// A listener closed at once: nothing answers there.
		gone := httptest.NewServer(nil)
		gone.Close()
		raw["verdictd"] = map[string]string{"url": gone.URL, "token": agentToken}
	})
	recv := otlptest.New(t)
	traced = serve(func(raw map[string]any) { raw["tracing"] = map[string]any{"endpoint": recv.URL} })
	return live, dead, traced
}

// The first round of a 2026-07-28 host's gated call is served without the library, through
// the same gate, and answered with the library's bytes: the same call sent to the gateway's
// handler (fast) and to the library's (slow) gets the same answer, but for requestState and
// the record ids (see sameGatedAnswer), whether it executes, asks, is refused by the policy,
// finds verdictd down, or carries a malformed io.verdict member. A call whose _meta holds the
// raw check's io.verdict/refused is left to the library, which refuses it there; so is every
// call while tracing is on.
func TestPlainGatedAnswersAsTheLibrary(t *testing.T) {
	live, dead, traced := gatedGateways(t)
	const (
		list     = "Please list my last 5 transactions."
		transfer = "Please send money: 5000 won to account 330-000-001."
		tooMuch  = "Please send money: 2000000 won to account 330-000-001."
	)
	listArgs := `{"account":"1102534471","limit":5}`
	transferArgs := func(amount string) string {
		return `{"from_account":"1102534471","to_account":"330-000-001","amount":` + amount + `}`
	}
	gated := func(name, args, meta string) hostCall {
		return hostCall{body: gatedBody("4", name, args, meta), header: map[string]string{"Mcp-Name": name}}
	}
	for _, tc := range []struct {
		name  string
		p     *plainGateway
		c     hostCall
		plain bool   // served without the library
		want  string // in the answer
	}{
		{"executes", live, gated("bank.list_transactions", listArgs, grounded(list, "", map[string]string{"limit": "5"})),
			true, `"io.verdict/execution_record":`},
		{"asks", live, gated("bank.transfer", transferArgs("5000"),
			grounded(transfer, "send money", map[string]string{"amount": "5000", "to_account": "330-000-001"})),
			true, `"resultType":"input_required"`},
		{"refused by the policy", live, gated("bank.transfer", transferArgs("2000000"),
			grounded(tooMuch, "send money", map[string]string{"amount": "2000000", "to_account": "330-000-001"})),
			true, `"io.verdict/outcome":"hold"`},
		{"verdictd down", dead, gated("bank.list_transactions", listArgs, grounded(list, "", map[string]string{"limit": "5"})),
			true, `"io.verdict/reason":"preflight_failed"`},
		{"malformed member", live, gated("bank.list_transactions", listArgs, `,"io.verdict/locations":"limit"`),
			true, `"io.verdict/reason":"meta_invalid"`},
		{"io.verdict/refused from the host", live, gated("bank.list_transactions", listArgs,
			grounded(list, "", map[string]string{"limit": "5"})+`,"io.verdict/refused":"none"`),
			false, `"io.verdict/reason":"meta_invalid"`},
		{"tracing on", traced, gated("bank.list_transactions", listArgs, grounded(list, "", map[string]string{"limit": "5"})),
			false, `"io.verdict/execution_record":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.p.plainCalls(t)
			fast := tc.p.post(t, tc.p.fast, tc.c)
			want := 0.0
			if tc.plain {
				want = 1
			}
			if got := tc.p.plainCalls(t) - before; got != want {
				t.Fatalf("served without the library %v times, want %v: %s", got, want, short(fast.body))
			}
			slow := tc.p.post(t, tc.p.slow, tc.c)
			if !sameGatedAnswer(fast, slow) {
				t.Fatalf("\nfast %d %q %q %s\nslow %d %q %q %s", fast.status, fast.ctype, fast.cache, fast.body,
					slow.status, slow.ctype, slow.cache, slow.body)
			}
			if !strings.Contains(fast.body, tc.want) {
				t.Fatalf("answer without %s: %s", tc.want, fast.body)
			}
		})
	}
}
