package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/verdictd"
)

// Edits of testdata/policy.yaml, the policy verdictd of the shared stack
// runs. The gateway gets its own copy to rewrite: verdictd keeps saying
// get_balance is read, so a get_balance the gateway gates comes back from
// verdictd as not_gated and is refused, and the call never reaches the
// bank either way.
const (
	balanceRead         = "  bank/get_balance:\n    class: read\n"
	balanceIrreversible = "  bank/get_balance:\n    class: irreversible\n"
	transferGated       = "  bank/transfer:\n    class: irreversible\n"
	transferRead        = "  bank/transfer:\n    class: read\n"
)

// policyText is the test policy with version set and each edit (old, new,
// old, new, ...) applied.
func (s *stack) policyText(t testing.TB, version string, edits ...string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := strings.ReplaceAll(string(b), "BANK_URL", s.bankURL)
	p = strings.Replace(p, `policy_version: "mcpgate-test.1"`, fmt.Sprintf("policy_version: %q", version), 1)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(p, edits[i]) {
			t.Fatalf("policy has no %q", edits[i])
		}
		p = strings.Replace(p, edits[i], edits[i+1], 1)
	}
	return p
}

// writeAtomic replaces path's content the way an operator's tooling
// should: the watcher never sees a half-written file.
func writeAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadingGateway starts a gateway on its own copy of the policy,
// checked for changes every poll.
func (s *stack) reloadingGateway(t *testing.T, poll string) (*gateway, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	writeAtomic(t, path, s.policyText(t, "reload.1"))
	cfg := s.gatewayConfig(dir)
	cfg["policy"] = path
	cfg["policy_poll"] = poll
	return startGateway(t, cfg), path
}

// waitMetric waits until series has the value want. It bounds the wait
// only to fail a stuck test; nothing is asserted about how long it takes.
func (g *gateway) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	if err := g.awaitMetric(t, series, want); err != nil {
		t.Fatal(err)
	}
}

// awaitMetric is waitMetric for goroutines that must not end the test.
func (g *gateway) awaitMetric(t *testing.T, series string, want float64) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := g.metric(t, series)
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is %v, want %v\n%s", series, got, want, readFile(g.log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gateway) hup(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

const (
	reloadsOK    = `mcpgate_policy_reloads_total{result="ok"}`
	reloadsError = `mcpgate_policy_reloads_total{result="error"}`
)

func policyInfo(version string) string { return `mcpgate_policy_info{version="` + version + `"}` }

// record fetches a decision record from verdictd.
func (s *stack) record(t *testing.T, id string) map[string]any {
	t.Helper()
	return adminGet(t, s.verdictd+"/v1/records/"+id)
}

// adminGet fetches one record with the admin token and decodes it.
func adminGet(t *testing.T, url string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// logged reports whether log (JSON lines) has an entry at level with
// message msg and the attribute key equal to value.
func logged(log, level, msg, key, value string) bool {
	for line := range strings.Lines(log) {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["level"] == level && e["msg"] == msg && e[key] == value {
			return true
		}
	}
	return false
}

func balanceCall(t *testing.T, sess *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkBalance calls get_balance and checks where it went: to the bank
// over the gateway's own connection (forwarded), or to verdictd and not
// to the bank (gated).
func (s *stack) checkBalance(t *testing.T, sess *mcp.ClientSession, forwarded bool) {
	t.Helper()
	mark := s.mark(t)
	res := balanceCall(t, sess)
	reads := len(only(mustCalls(t, s, mark), "get_balance"))
	if forwarded {
		if res.IsError || reads != 1 {
			t.Fatalf("want the read forwarded: isError=%v %q %v; bank saw %d get_balance", res.IsError, text(res), res.Meta, reads)
		}
		return
	}
	if reads != 0 {
		t.Fatalf("bank saw %d get_balance calls, want none: the call must go through the gate", reads)
	}
	id, _ := res.Meta["io.verdict/record_id"].(string)
	if !res.IsError || id == "" {
		t.Fatalf("want the gate's refusal with a record id, got isError=%v %q %v", res.IsError, text(res), res.Meta)
	}
	rec := s.record(t, id)
	if rec["server"] != "bank" || rec["tool"] != "get_balance" || rec["principal"] != "u_01" {
		t.Errorf("record %s is for %v/%v of %v, want bank/get_balance of u_01", id, rec["server"], rec["tool"], rec["principal"])
	}
}

func TestDefaultPolicyPollIsVerdictd(t *testing.T) {
	if mcpgate.DefaultPolicyPoll != verdictd.DefaultPolicyPoll {
		t.Errorf("mcpgate.DefaultPolicyPoll %s, verdictd.DefaultPolicyPoll %s: keep them equal",
			mcpgate.DefaultPolicyPoll, verdictd.DefaultPolicyPoll)
	}
}

// A policy edit reaches the next call without a restart; a broken file
// changes nothing and is counted once.
func TestPolicyFileChangeReclassifiesTheNextCall(t *testing.T) {
	s := bankStack(t)
	g, path := s.reloadingGateway(t, "20ms")
	sess := g.connect(t, userToken, nil)
	if v := g.metric(t, policyInfo("reload.1")); v != 1 {
		t.Fatalf("policy info of the first policy %v, want 1", v)
	}
	for _, name := range []string{reloadsOK, reloadsError} {
		if v := g.metric(t, name); v != 0 {
			t.Fatalf("%s %v before any reload, want 0", name, v)
		}
	}
	for _, step := range []struct {
		name      string
		content   string
		version   string // in force afterwards
		forwarded bool
		ok, errs  float64 // reload counters afterwards
	}{
		{name: "read at start", version: "reload.1", forwarded: true},
		{name: "broken file meant to gate the read",
			content: s.policyText(t, "reload.broken", balanceRead, balanceIrreversible) + "not_a_policy_key: 1\n",
			version: "reload.1", forwarded: true, errs: 1},
		{name: "reclassified read to irreversible",
			content: s.policyText(t, "reload.2", balanceRead, balanceIrreversible),
			version: "reload.2", forwarded: false, ok: 1, errs: 1},
		{name: "classification removed",
			content: s.policyText(t, "reload.3", balanceRead, ""),
			version: "reload.3", forwarded: false, ok: 2, errs: 1},
		{name: "read again",
			content: s.policyText(t, "reload.4"),
			version: "reload.4", forwarded: true, ok: 3, errs: 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.content != "" {
				writeAtomic(t, path, step.content)
			}
			// The counters say the watcher has read the file; the
			// version says which policy is in force.
			g.waitMetric(t, reloadsError, step.errs)
			g.waitMetric(t, reloadsOK, step.ok)
			g.waitMetric(t, policyInfo(step.version), 1)
			s.checkBalance(t, sess, step.forwarded)
		})
	}
	log := readFile(g.log)
	var failed string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "policy reload failed") {
			failed = line
		}
	}
	if !strings.Contains(failed, `"level":"ERROR"`) || !strings.Contains(failed, "not_a_policy_key") {
		t.Errorf("the failed reload is not logged at error level with its reason: %q", failed)
	}
}

func TestSIGHUPReloadsThePolicy(t *testing.T) {
	s := bankStack(t)
	// The watcher never ticks during the test: only SIGHUP reloads.
	g, path := s.reloadingGateway(t, "1h")
	sess := g.connect(t, userToken, nil)
	s.checkBalance(t, sess, true)

	writeAtomic(t, path, s.policyText(t, "hup.2", balanceRead, balanceIrreversible))
	g.hup(t)
	g.waitMetric(t, reloadsOK, 1)
	g.waitMetric(t, policyInfo("hup.2"), 1)
	s.checkBalance(t, sess, false)

	g.hup(t) // unchanged: still a reload asked for and done
	g.waitMetric(t, reloadsOK, 2)

	writeAtomic(t, path, "policy_version: [not, a, string]\n")
	g.hup(t)
	g.waitMetric(t, reloadsError, 1)
	if v := g.metric(t, policyInfo("hup.2")); v != 1 {
		t.Errorf("policy info after a broken file %v, want the old version", v)
	}
	s.checkBalance(t, sess, false)
}

// A gated call whose tool is reclassified read between its rounds
// finishes through the gate with the user's answers; the next call runs
// under the new class.
func TestCallInFlightDuringReloadCompletes(t *testing.T) {
	s := bankStack(t)
	g, path := s.reloadingGateway(t, "1h")
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	next := s.policyText(t, "inflight.2", transferGated, transferRead)
	var (
		once      sync.Once
		reloadErr error
	)
	// The reload happens while the host holds the first form: the call
	// has started and is waiting for the user.
	answer := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		once.Do(func() {
			if reloadErr = os.WriteFile(path+".tmp", []byte(next), 0o600); reloadErr != nil {
				return
			}
			if reloadErr = os.Rename(path+".tmp", path); reloadErr != nil {
				return
			}
			if reloadErr = g.cmd.Process.Signal(syscall.SIGHUP); reloadErr != nil {
				return
			}
			reloadErr = g.awaitMetric(t, policyInfo("inflight.2"), 1)
		})
		if reloadErr != nil {
			return nil, reloadErr
		}
		return u.answer(ctx, req)
	}
	sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: answer})
	mark := s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if reloadErr != nil {
		t.Fatal(reloadErr)
	}
	if res.IsError {
		t.Fatalf("the call in flight did not complete: %s %v", text(res), res.Meta)
	}
	if v := g.metric(t, reloadsOK); v != 1 {
		t.Fatalf("reloads %v during the call, want 1", v)
	}
	transfers := only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"110-222-333"`) {
		t.Fatalf("bank saw %+v, want one transfer with the user's answers", transfers)
	}
	if res.Meta["io.verdict/execution_record"] == nil {
		t.Errorf("the call did not finish through the executor: %v", res.Meta)
	}

	// The next call is read now: forwarded with the model's own
	// arguments (an account the bank does not know, so nothing moves).
	mark = s.mark(t)
	res, err = sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	transfers = only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"999-888-777"`) || res.Meta["io.verdict/record_id"] != nil {
		t.Fatalf("bank saw %+v (result %s %v), want the call forwarded as the new policy says", transfers, text(res), res.Meta)
	}
}

// Over stdio, without an HTTP listener: SIGHUP reloads, tools of a server
// the policy dropped are withdrawn (and the session is told), a server it
// added is not connected to, and a server it brings back is exposed again.
func TestPolicyServerSetChanges(t *testing.T) {
	s := bankStack(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	writeAtomic(t, path, s.policyText(t, "servers.1"))
	cfg := s.gatewayConfig(dir)
	delete(cfg, "listen")
	cfg["policy"] = path
	cfg["policy_poll"] = "1h"
	cfgPath := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mcpgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bins["mcpgate"], "serve", "--config", cfgPath, "--stdio")
	cmd.Stderr = logf
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := ctxT(t)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	defer func() {
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(logPath))
		}
	}()
	listed := func() []string {
		t.Helper()
		res, err := sess.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return names
	}
	waitChange := func() {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no tools/list_changed\n%s", readFile(logPath))
		}
	}
	// The first listing may still be on its way.
	for !slices.Contains(listed(), "bank.get_balance") {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("bank tools never listed")
		}
	}

	// The policy now names the same server "ledger" instead of "bank".
	ledger := strings.ReplaceAll(s.policyText(t, "servers.2"), "bank", "ledger")
	writeAtomic(t, path, ledger)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitChange()
	if got := listed(); len(got) != 0 {
		t.Errorf("after the reload the gateway lists %v, want nothing: bank is gone and ledger is not connected", got)
	}
	mark := s.mark(t)
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}})
	if err == nil && !res.IsError {
		t.Errorf("a tool of a dropped server ran: %s", text(res))
	}
	if n := len(mustCalls(t, s, mark)); n != 0 {
		t.Errorf("bank saw %d calls after its server left the policy", n)
	}
	for _, want := range []struct{ msg, server string }{
		{"server added by the policy is not exposed: the gateway connects to it at restart", "ledger"},
		{"server removed by the policy: its tools are no longer exposed", "bank"},
	} {
		if !logged(readFile(logPath), "WARN", want.msg, "server", want.server) {
			t.Errorf("no warning %q for server %s", want.msg, want.server)
		}
	}

	writeAtomic(t, path, s.policyText(t, "servers.3", balanceRead, balanceIrreversible))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitChange()
	for !slices.Contains(listed(), "bank.get_balance") {
		waitChange()
	}
	// Back, and under the class the policy gives it now.
	mark = s.mark(t)
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Meta["io.verdict/record_id"] == nil || len(mustCalls(t, s, mark)) != 0 {
		t.Errorf("get_balance after coming back as irreversible: %s %v, bank saw %v", text(res), res.Meta, mustCalls(t, s, mark))
	}
}

// Reload in the same process as calls, so that the race detector sees
// the swap: concurrent calls each run under one policy or the other, and
// once Reload returns, the next call runs under the new one.
func TestReloadWhileCallsRun(t *testing.T) {
	s := bankStack(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	read, gated := s.policyText(t, "race.read"), s.policyText(t, "race.gated", balanceRead, balanceIrreversible)
	writeAtomic(t, path, read)
	raw := s.gatewayConfig(dir)
	raw["policy"] = path
	raw["policy_poll"] = "1h"
	// Three callers as fast as the stack answers: the race is the subject, not the rate.
	raw["state"] = map[string]any{"calls_per_minute": 1 << 30, "call_burst": 1 << 30}
	cfgPath := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(cfgPath, raw); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpgate.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	gw, err := mcpgate.New(ctx, *cfg, mcpgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = gw.Run(ctx) }()
	srv := httptest.NewServer(gw.Handler())
	defer func() {
		srv.Close()
		cancel()
		<-runDone
		gw.Close(context.Background())
	}()
	g := &gateway{url: srv.URL}
	sess := g.connect(t, userToken, nil)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "1102534471"}})
				if err != nil {
					t.Error(err)
					return
				}
				// Forwarded (read) or refused by verdictd (gated): nothing else.
				if res.IsError && reason(res) != "not_gated" {
					t.Errorf("call during reloads: %s %v", text(res), res.Meta)
					return
				}
			}
		})
	}
	for i := range 20 {
		content := read
		if i%2 == 0 {
			content = gated
		}
		writeAtomic(t, path, content)
		if err := gw.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	for _, c := range []struct {
		content   string
		forwarded bool
	}{{gated, false}, {read, true}, {gated, false}} {
		writeAtomic(t, path, c.content)
		if err := gw.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		s.checkBalance(t, sess, c.forwarded)
	}
	if gw.PolicyVersion() != "race.gated" {
		t.Errorf("policy version %q, want race.gated", gw.PolicyVersion())
	}
}
