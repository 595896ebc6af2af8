package agentts_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/testing/nodetest"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// The example's tokens, in clear; its configs hold their SHA-256.
const (
	adminToken   = "agent-ts-admin-token"
	userToken    = "example-user-token"
	carefulToken = "example-careful-user-token"
)

// program is the example as node runs it: the versions its lock file pins, checked in an
// installed node_modules, and its sources (package.json's engines ask for node 20).
var program = nodetest.Program{
	Dir:  ".",
	Name: "agent-ts",
	Pinned: map[string]string{
		"@modelcontextprotocol/sdk": "1.32.2",
		"@openai/agents":            "0.20.0",
	},
	Scripts: []string{"agent.mjs", "gateway-server.mjs", "verdict-meta.mjs"},
	MinNode: 20,
}

// TestAgentScenarios runs agent.mjs, an agent on the OpenAI Agents SDK, against the real bank,
// verdictd, executor and mcpgate processes started from the example's own configs, and checks
// each scenario's outcome against the daemons' records and the bank's ledger: the grounded
// transfer runs once without a question; the payee from an injected e-mail and the declined
// approval run nothing.
func TestAgentScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack and node")
	}
	node, dir := nodetest.Install(t, program)
	s := startStack(t)

	runs := map[string]scenario{}
	for _, name := range []string{"grounded", "injected", "declined"} {
		runs[name] = runAgent(t, s, node, dir, name, userToken, true)
	}
	// The grounded scenario fails when its user is asked anything: run as the user whose
	// checklist asks an approval of every transfer, the script says so, exits 1, and its
	// handler's cancel runs nothing.
	asked := runAgent(t, s, node, dir, "grounded", carefulToken, false)
	if asked.OK || len(asked.Forms) != 1 || !slices.ContainsFunc(asked.Problems, func(p string) bool { return strings.Contains(p, "asked") }) {
		t.Errorf("grounded, asked: %+v", asked)
	}

	grounded := runs["grounded"]
	if grounded.Result.IsError || grounded.Result.ExecutionRecord == "" || len(grounded.Forms) != 0 {
		t.Errorf("grounded: %+v", grounded)
	}
	for _, name := range []string{"injected", "declined"} {
		r := runs[name]
		if !r.Result.IsError || r.Result.Reason != "declined" || len(r.Forms) != 1 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if f := runs["injected"].Forms; len(f) == 1 && !slices.Contains(f[0].Fields, "to_account") {
		t.Errorf("injected: the form asked %v, not the payee", f[0].Fields)
	}
	if f := runs["declined"].Forms; len(f) == 1 && len(f[0].Approvals) == 0 {
		t.Errorf("declined: the form asked no approval: %+v", f[0])
	}
	// The host sent the user's turn as a user segment and the e-mail as untrusted, with the
	// payee located in the e-mail.
	checkMetaSent(t, runs["injected"])

	records := decisionRecords(t, s)
	executions := executionRecords(t, s)
	for name, r := range runs {
		recs := records[r.ConversationID]
		if len(recs) == 0 {
			t.Errorf("%s: verdictd has no decision record of conversation %s", name, r.ConversationID)
			continue
		}
		var issued []*api.Record
		for _, rec := range recs {
			if rec.Outcome == api.OutcomeVerdictIssued {
				issued = append(issued, rec)
			}
		}
		switch name {
		case "grounded":
			// One preflight, settled from the user's words: nothing was asked.
			if len(recs) != 1 || len(issued) != 1 {
				t.Errorf("grounded: %d records, %d verdicts; want one of each", len(recs), len(issued))
				continue
			}
			for _, slot := range issued[0].Slots {
				if slot.SlotID != "amount" && slot.SlotID != "to_account" {
					continue
				}
				if slot.Source == nil || *slot.Source != api.SourceInstruction {
					t.Errorf("grounded: %s settled from %v, want instruction", slot.SlotID, slot.Source)
				}
			}
			x := executions[*issued[0].VerdictID]
			if x == nil || x.Decision != api.ExecutionExecuted || x.RecordID != grounded.Result.ExecutionRecord {
				t.Errorf("grounded: execution record %+v, want executed %s", x, grounded.Result.ExecutionRecord)
			}
		default:
			if len(issued) != 0 {
				t.Errorf("%s: %d verdicts issued", name, len(issued))
			}
			for _, rec := range recs {
				if rec.Outcome != api.OutcomeAskUser {
					t.Errorf("%s: outcome %s, want ask_user", name, rec.Outcome)
				}
			}
		}
	}
	if len(executions) != 1 {
		t.Errorf("the executor has %d execution records, want the grounded transfer's only", len(executions))
	}

	// The ledger: exactly the grounded transfer moved money.
	ledger := readLedger(t, s)
	for acct, want := range map[string]int64{"110-222-333": 900, "1102534471": 2_000_000 - 900, "220-555-010": 500_000} {
		if got := ledger.Accounts[acct].Balance; got != want {
			t.Errorf("balance of %s is %d, want %d", acct, got, want)
		}
	}
	if n := len(ledger.Transactions); n != 1 {
		t.Errorf("the bank holds %d transactions, want 1: %+v", n, ledger.Transactions)
	}
}

// TestVerdictMetaModule runs the host-side module's own tests (verdict-meta.test.mjs, on
// node:test): code-point spans, token edges, the user's turns before what the agent read, text
// that imitates a user turn or a trust label staying untrusted, _meta for gated tools only, and
// a seeded property over random texts and values. The module imports nothing but itself.
func TestVerdictMetaModule(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testtool.Missing(t, "node not found: "+err.Error())
	}
	out, err := exec.Command(node, "--test", "verdict-meta.test.mjs").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test verdict-meta.test.mjs: %v\n%s", err, out)
	}
}

// scenario is the line agent.mjs prints for one scenario.
type scenario struct {
	Scenario       string           `json:"scenario"`
	ConversationID string           `json:"conversation_id"`
	OK             bool             `json:"ok"`
	Problems       []string         `json:"problems"`
	Message        string           `json:"message"`
	MetaSent       []map[string]any `json:"meta_sent"`
	Forms          []struct {
		Message   string   `json:"message"`
		Fields    []string `json:"fields"`
		Approvals []string `json:"approvals"`
	} `json:"forms"`
	Result struct {
		IsError         bool   `json:"isError"`
		Reason          string `json:"reason"`
		Outcome         string `json:"outcome"`
		RecordID        string `json:"record_id"`
		ExecutionRecord string `json:"execution_record"`
		Text            string `json:"text"`
	} `json:"result"`
}

// runAgent runs one scenario, with token as MCPGATE_TOKEN, and returns its line; the script's
// own verdict on the scenario ("ok", and its exit status) must be wantOK.
func runAgent(t *testing.T, s *stack, node, dir, name, token string, wantOK bool) scenario {
	t.Helper()
	// The bound only keeps a hung node from holding the test run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "agent.mjs"), name)
	cmd.Env = append(os.Environ(),
		"MCPGATE_URL="+s.gateway+"/mcp", "MCPGATE_TOKEN="+token, "MCPGATE_CONFIRM_TOKEN="+carefulToken)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var r scenario
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); jerr != nil {
		t.Fatalf("%s: node printed %q (%v; exit %v)\n%s", name, stdout.String(), jerr, err, stderr.String())
	}
	if (err == nil) != wantOK || r.OK != wantOK || r.Scenario != name {
		t.Errorf("%s: exit %v, ok %v (want %v), problems %q %s\n%s\n%s", name, err, r.OK, wantOK, r.Problems, r.Message, stdout.String(), stderr.String())
	}
	t.Logf("%s: %s", name, strings.TrimSpace(stdout.String()))
	return r
}

// checkMetaSent checks what the host attached to the injected scenario's call.
func checkMetaSent(t *testing.T, r scenario) {
	t.Helper()
	if len(r.MetaSent) != 1 {
		t.Fatalf("injected: the host attached _meta to %d calls, want 1", len(r.MetaSent))
	}
	b, _ := json.Marshal(r.MetaSent[0])
	var m struct {
		Instruction []api.Segment           `json:"io.verdict/instruction"`
		Locations   map[string]api.Location `json:"io.verdict/locations"`
		Conv        string                  `json:"io.verdict/conversation_id"`
		NewRequest  bool                    `json:"io.verdict/new_request"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Instruction) != 2 || m.Instruction[0].Trust != "user" || m.Instruction[1].Trust != "untrusted" || m.Instruction[1].Origin == "" {
		t.Errorf("injected: segments %+v, want the user's turn then the e-mail, untrusted with its origin", m.Instruction)
	}
	if l, ok := m.Locations["to_account"]; !ok || l.Segment != 1 {
		t.Errorf("injected: to_account located at %+v, want in the e-mail (segment 1)", m.Locations)
	}
	if m.Conv != r.ConversationID || !m.NewRequest {
		t.Errorf("injected: conversation %q new_request %v", m.Conv, m.NewRequest)
	}
}

// stack is the bank, verdictd, the executor and mcpgate, running from the example's configs.
type stack struct {
	dir                         string
	verdictd, executor, gateway string // base URLs
}

// startStack builds the four programs, generates keys and starts them, each from the
// example's config with its addresses and paths moved into a temporary directory.
func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	bin := map[string]string{}
	for name, pkg := range map[string]string{
		"verdictd": "github.com/verdictgate/verdict/cmd/verdictd",
		"executor": "github.com/verdictgate/verdict/cmd/executor",
		"mcpgate":  "github.com/verdictgate/verdict/cmd/mcpgate",
		"bank":     "github.com/verdictgate/verdict/examples/bank",
	} {
		p, err := testbin.Build(filepath.Join(dir, "bin"), name, pkg)
		if err != nil {
			t.Fatal(err)
		}
		bin[name] = p
	}
	for _, name := range []string{"verdictd", "executor"} {
		if out, err := exec.Command(bin[name], "keygen", "--out", filepath.Join(dir, "keys", name)).CombinedOutput(); err != nil {
			t.Fatalf("%s keygen: %v\n%s", name, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mcpgate-state.key"), bytes.Repeat([]byte("k"), 32), 0o600); err != nil {
		t.Fatal(err)
	}

	bankURL := startBank(t, dir, bin["bank"])
	addrs := freeAddrs(t, 3)
	s := &stack{dir: dir, verdictd: "http://" + addrs[0], executor: "http://" + addrs[1], gateway: "http://" + addrs[2]}
	rewrite := strings.NewReplacer(
		"http://127.0.0.1:8890/mcp", bankURL,
		"127.0.0.1:8880", addrs[0],
		"127.0.0.1:8881", addrs[1],
		"127.0.0.1:8892", addrs[2],
		"examples/agent-ts/policy.yaml", filepath.Join(dir, "policy.yaml"),
		"tmp/agent-ts/", dir+"/",
	)
	for _, f := range []string{"policy.yaml", "verdictd.yaml", "executor.yaml", "mcpgate.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(rewrite.Replace(string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct{ name, url string }{{"verdictd", s.verdictd}, {"executor", s.executor}, {"mcpgate", s.gateway}} {
		start(t, dir, bin[d.name], d.name, "serve", "--config", filepath.Join(dir, d.name+".yaml"))
		waitReady(t, d.url, filepath.Join(dir, d.name+".log"))
	}
	return s
}

// start runs a daemon until the test ends, its output in dir/<name>.log, shown if the test
// failed.
func start(t *testing.T, dir, path, name string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop(cmd)
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// stop interrupts a process and waits for it to end.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
}

// startBank runs the bank over streamable HTTP and returns its URL, read from the line it
// prints once it listens.
func startBank(t *testing.T, dir, path string) string {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "bank.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--http", "127.0.0.1:0", "--no-verify", "--state", filepath.Join(dir, "bank.json"), "--log", filepath.Join(dir, "bank-calls.jsonl"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	t.Cleanup(func() {
		stop(cmd)
		<-copied
		logf.Close()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		fmt.Fprintln(logf, sc.Text())
		if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go func() { io.Copy(logf, stderr); close(copied) }()
			return strings.TrimSpace(url)
		}
	}
	close(copied)
	t.Fatal("the bank did not start; see bank.log")
	return ""
}

// freeAddrs returns n different loopback addresses nobody listens on now.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// waitReady waits until base answers /readyz with 200. The daemons report readiness only
// there; the bound stops a daemon that never gets ready from holding the run.
func waitReady(t *testing.T, base, logPath string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("%s not ready: %s\n%s", base, last, b)
}

// decisionRecords reads verdictd's decision records, by conversation.
func decisionRecords(t *testing.T, s *stack) map[string][]*api.Record {
	t.Helper()
	c, err := client.New(s.verdictd, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*api.Record{}
	_, err = c.Records(context.Background(), client.Query{}, func(raw json.RawMessage) error {
		var rec api.Record
		if err := apijson.Unmarshal(raw, &rec); err != nil {
			return err
		}
		out[rec.ConversationID] = append(out[rec.ConversationID], &rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// executionRecords reads the executor's execution records, by verdict id.
func executionRecords(t *testing.T, s *stack) map[string]*api.ExecutionRecord {
	t.Helper()
	c, err := client.New(s.executor, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*api.ExecutionRecord{}
	_, err = c.Executions(context.Background(), client.Query{}, func(raw json.RawMessage) error {
		var x api.ExecutionRecord
		if err := apijson.Unmarshal(raw, &x); err != nil {
			return err
		}
		if x.VerdictID == "" {
			return errors.New("an execution record without a verdict id")
		}
		out[x.VerdictID] = &x
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ledger is the part of the bank's state file the test reads.
type ledger struct {
	Accounts map[string]struct {
		Balance int64 `json:"balance"`
	} `json:"accounts"`
	Transactions []json.RawMessage `json:"transactions"`
}

func readLedger(t *testing.T, s *stack) ledger {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "bank.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l ledger
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}
