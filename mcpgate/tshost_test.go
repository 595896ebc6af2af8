package mcpgate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/nodetest"
)

// tsHostDir is the TypeScript host's source: package.json, its lock file
// and host.mjs.
const tsHostDir = "../e2e/tshost"

// tsProgram is the host as node runs it: the version of @modelcontextprotocol/sdk its lock
// file pins, and its one script.
var tsProgram = nodetest.Program{
	Dir:     tsHostDir,
	Name:    "tshost",
	Pinned:  map[string]string{"@modelcontextprotocol/sdk": "1.32.2"},
	Scripts: []string{"host.mjs"},
}

// tsHost returns node and the path of host.mjs beside an installed node_modules: the source
// directory's, which scripts/test installs, or else one installed with npm ci into the user's
// cache (see nodetest). Without node or npm the test is skipped (failed under
// VERDICT_CI=1).
func tsHost(t *testing.T) (node, script string) {
	t.Helper()
	node, dir := nodetest.Install(t, tsProgram)
	return node, filepath.Join(dir, "host.mjs")
}

// tsStep is one line the host prints.
type tsStep struct {
	Step            string          `json:"step"`
	Message         string          `json:"message"`
	ProtocolVersion string          `json:"protocolVersion"`
	SessionID       string          `json:"sessionId"`
	Names           []string        `json:"names"`
	Result          json.RawMessage `json:"result"`
	Forms           int             `json:"forms"`
	// Messages are the messages of the forms the user saw, in order.
	Messages []string `json:"messages"`
}

// tsResult is a raw tools/call result as the host read it.
type tsResult struct {
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	StructuredContent map[string]any `json:"structuredContent"`
	ResultType        *string        `json:"resultType"`
}

// tsMemo is the memo the model drafts in the host's gated call.
const tsMemo = "Rent for December — flat 3B"

// runTSHost runs the host on scenario and checks every step as it prints
// it. Each step is read as the host prints it: the test waits on the
// host's output, never on a clock.
func runTSHost(t *testing.T, s *stack, scenario map[string]any, wantRevision string) {
	t.Helper()
	node, script := tsHost(t)
	scenario["read"] = map[string]any{"name": "bank.get_balance", "arguments": map[string]any{"account": "220-555-010"}}
	args := modelArgs()
	args["memo"] = tsMemo
	scenario["gated"] = map[string]any{"name": "bank.transfer", "arguments": args}
	// The drafted memo is reviewed with a choice, never retyped.
	scenario["answers"] = map[string]any{"to_account": "110-222-333", "amount": 1500, "memo": "approve"}
	arg, _ := json.Marshal(scenario)
	// The bound only stops a host that hangs from holding the test run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, string(arg))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	mark := s.mark(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := func(want string) tsStep {
		t.Helper()
		if !sc.Scan() {
			cmd.Wait()
			t.Fatalf("host ended before %s: %v\n%s", want, sc.Err(), stderr.String())
		}
		var st tsStep
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatalf("host printed %q: %v", sc.Text(), err)
		}
		if st.Step != want {
			t.Fatalf("host step %q (%s), want %s\n%s", st.Step, st.Message, want, stderr.String())
		}
		return st
	}
	result := func(st tsStep) tsResult {
		t.Helper()
		var r tsResult
		if err := json.Unmarshal(st.Result, &r); err != nil {
			t.Fatalf("%s result %s: %v", st.Step, st.Result, err)
		}
		// An older host reads the gateway's own result: no 2026-07-28
		// resultType, and not the bank's serverInfo.
		if r.ResultType != nil {
			t.Errorf("%s result carries resultType %q", st.Step, *r.ResultType)
		}
		if strings.Contains(string(st.Result), `"name":"bank"`) {
			t.Errorf("%s result carries the upstream's serverInfo: %s", st.Step, st.Result)
		}
		return r
	}

	c := next("connected")
	if c.ProtocolVersion != wantRevision {
		t.Errorf("negotiated %q, want %s", c.ProtocolVersion, wantRevision)
	}
	if scenario["transport"] == "http" && c.SessionID == "" {
		t.Error("an older host over HTTP got no session")
	}
	tools := next("tools")
	for _, name := range []string{"bank.transfer", "bank.get_balance"} {
		if !slices.Contains(tools.Names, name) {
			t.Errorf("tools/list lacks %s: %v", name, tools.Names)
		}
	}
	read := result(next("read"))
	if read.IsError || read.StructuredContent["account"] != "220-555-010" {
		t.Errorf("read: %+v", read)
	}
	if c := mustCalls(t, s, mark); len(c) != 1 || c[0].Tool != "get_balance" {
		t.Errorf("bank saw %+v for the read, want one get_balance", c)
	}

	mark = s.mark(t)
	gated := next("gated")
	if r := result(gated); r.IsError || r.Meta["io.verdict/execution_record"] == nil {
		t.Fatalf("gated call: %s\n%s", gated.Result, stderr.String())
	}
	if gated.Forms < 2 {
		t.Errorf("the user saw %d forms, want a value round and an approval round", gated.Forms)
	}
	if !slices.ContainsFunc(gated.Messages, func(m string) bool { return strings.HasSuffix(m, "\n"+tsMemo) }) {
		t.Errorf("no form showed the whole memo last: %q", gated.Messages)
	}
	transfers := only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"amount":1500`) ||
		!strings.Contains(transfers[0].Arguments, `"to_account":"110-222-333"`) ||
		!strings.Contains(transfers[0].Arguments, `"memo":"Rent for December — flat 3B"`) {
		t.Fatalf("bank saw %+v, want exactly one transfer of the user's answers", transfers)
	}

	mark = s.mark(t)
	declined := next("declined")
	if r := result(declined); !r.IsError || r.Meta["io.verdict/reason"] != "declined" {
		t.Errorf("declined form: %s", declined.Result)
	}
	if declined.Forms != 1 {
		t.Errorf("the user saw %d forms after declining the first", declined.Forms)
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Errorf("bank saw %d transfers after the user declined", n)
	}

	// An approval left unticked is the user's "no", sent in an accepted form: the form's
	// schema must let the host send it (a "const": true there makes the host's own check
	// refuse the answer, and the gateway would read a form that could not be shown).
	mark = s.mark(t)
	unticked := next("unticked")
	if r := result(unticked); !r.IsError || r.Meta["io.verdict/reason"] != "declined" {
		t.Errorf("unticked approval: %s\n%s", unticked.Result, stderr.String())
	}
	if unticked.Forms < 1 {
		t.Errorf("the user saw %d forms", unticked.Forms)
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Errorf("bank saw %d transfers after the user left the approval unticked", n)
	}
	next("done")
	if err := cmd.Wait(); err != nil {
		t.Errorf("host exit: %v\n%s", err, stderr.String())
	}
}

// TestTypeScriptSDKHost: a host on the official TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2, whose newest revision is 2025-11-25)
// lists the tools, reads through the gateway, has a gated call asked by
// elicitation and run exactly once, and runs nothing when it declines:
// over HTTP offering 2025-11-25 and 2025-06-18, and over stdio.
func TestTypeScriptSDKHost(t *testing.T) {
	s := bankStack(t)
	tsHost(t) // skip or install before anything starts
	dir := t.TempDir()
	cfg := s.gatewayConfig(dir)
	g := startGateway(t, cfg)
	for _, offer := range []string{"2025-11-25", "2025-06-18"} {
		t.Run("http "+offer, func(t *testing.T) {
			runTSHost(t, s, map[string]any{"transport": "http", "url": g.url + "/mcp", "token": userToken, "offer": offer}, offer)
		})
	}
	t.Run("stdio", func(t *testing.T) {
		delete(cfg, "listen")
		path := filepath.Join(dir, "stdio.yaml")
		if err := writeJSON(path, cfg); err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(dir, "stdio.log")
		runTSHost(t, s, map[string]any{"transport": "stdio", "command": bins["mcpgate"],
			"args": []string{"serve", "--config", path, "--stdio"}, "stderr": log}, "2025-11-25")
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(log))
		}
	})
}
