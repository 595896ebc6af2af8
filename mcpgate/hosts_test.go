package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
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
)

// connectAs opens an MCP session to the gateway over HTTP as a host of the
// given protocol revision ("" for the SDK's latest).
func (g *gateway) connectAs(t testing.TB, token, revision string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	return g.connectAt(t, "/mcp", token, revision, opts)
}

// connectAt is connectAs at the endpoint path ("/mcp", or a server's own "/mcp/<id>").
func (g *gateway) connectAt(t testing.TB, path, token, revision string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	return g.connectWith(t, path, token, revision, mcp.NewClient(&mcp.Implementation{Name: "test-host-" + revision, Version: "1"}, opts))
}

// connectWith is connectAt with the host's own client.
func (g *gateway) connectWith(t testing.TB, path, token, revision string, client *mcp.Client) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   g.url + path,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { sess.Close() })
	return sess, nil
}

// TestOlderHTTPHostIsAskedInASession: a host of 2025-06-18 or 2025-11-25
// over HTTP gets a session; a gated call asks it with elicitation/create
// on the call's stream and runs the user's call exactly once, and a form
// it declines runs nothing. A 2026-07-28 host gets no session and is asked
// through input_required, as before. Each host does the same at the
// aggregated endpoint (tools named "bank.<tool>") and at the bank's own
// (/mcp/bank, the bank's own names).
func TestOlderHTTPHostIsAskedInASession(t *testing.T) {
	s := bankStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	// Twelve gated calls of one principal in a row: more than the default burst.
	cfg["state"] = map[string]any{"calls_per_minute": 1 << 30, "call_burst": 1 << 30}
	g := startGateway(t, cfg)
	for _, at := range []struct{ path, prefix string }{{"/mcp", "bank."}, {"/mcp/bank", ""}} {
		for _, rev := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
			t.Run(at.path+"/"+rev, func(t *testing.T) {
				hostAskedAt(t, s, g, at.path, at.prefix, rev)
			})
		}
	}
}

// hostAskedAt is one host of TestOlderHTTPHostIsAskedInASession: a host of
// rev at the endpoint path, whose tools are named prefix + the bank's name.
func hostAskedAt(t *testing.T, s *stack, g *gateway, path, prefix, rev string) {
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1200}}
	sess, err := g.connectAt(t, path, userToken, rev, &mcp.ClientOptions{ElicitationHandler: u.answer})
	if err != nil {
		t.Fatal(err)
	}
	if got := sess.InitializeResult().ProtocolVersion; got != rev && rev != "2026-07-28" {
		t.Fatalf("negotiated %s, want %s", got, rev)
	}
	if stateful := sess.ID() != ""; stateful != (rev != "2026-07-28") {
		t.Errorf("session id %q for a %s host", sess.ID(), rev)
	}
	if v := g.metric(t, "mcpgate_sessions"); (v == 1) != (rev != "2026-07-28") {
		t.Errorf("mcpgate_sessions %v with one %s host connected", v, rev)
	}
	listed, err := sess.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(listed.Tools, func(tl *mcp.Tool) bool { return tl.Name == prefix+"transfer" }) {
		t.Errorf("tools/list lacks %stransfer", prefix)
	}
	mark := s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: prefix + "get_balance", Arguments: map[string]any{"account": "220-555-010"}})
	if err != nil || res.IsError {
		t.Fatalf("read: %v %v", err, res)
	}
	if c := mustCalls(t, s, mark); len(c) != 1 || c[0].Tool != "get_balance" {
		t.Errorf("bank saw %+v, want one get_balance", c)
	}
	mark = s.mark(t)
	res, err = sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: prefix + "transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("call failed: %s %v\n%s", text(res), res.Meta, readFile(g.log))
	}
	if len(u.shown()) < 2 {
		t.Errorf("want a value round and an approval round, got %d forms", len(u.shown()))
	}
	transfers := only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"amount":1200`) {
		t.Fatalf("bank saw %+v, want one transfer of the user's amount", transfers)
	}

	no := &user{action: "decline"}
	sess, err = g.connectAt(t, path, userToken, rev, &mcp.ClientOptions{ElicitationHandler: no.answer})
	if err != nil {
		t.Fatal(err)
	}
	mark = s.mark(t)
	res, err = sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: prefix + "transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || reason(res) != "declined" {
		t.Fatalf("want a declined tool error, got isError=%v %q %v", res.IsError, text(res), res.Meta)
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Fatalf("bank saw %d transfer calls after the user declined", n)
	}
}

// TestSessionsAreBounded: past max_sessions an older host's initialize is
// refused with a message that says why, and counted; a 2026-07-28 host,
// which needs no session, still connects; a session that ends frees its
// place.
func TestSessionsAreBounded(t *testing.T) {
	s := bankStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["max_sessions"] = 1
	g := startGateway(t, cfg)
	first, err := g.connectAs(t, userToken, "2025-11-25", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = g.connectAs(t, userToken, "2025-06-18", nil); err == nil {
		t.Fatal("a second session past max_sessions 1")
	}
	// What a host shows of the refusal: the body of the 503.
	req, _ := http.NewRequest(http.MethodPost, g.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+userToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "limit of 1 sessions") ||
		!strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), `"session_limit"`) {
		t.Errorf("refusal: %d %s", resp.StatusCode, body)
	}
	if v := g.metric(t, `mcpgate_sessions_refused_total{reason="session_limit"}`); v != 2 {
		t.Errorf("refusals counted %v, want 2", v)
	}
	if _, err := g.connectAs(t, userToken, "2026-07-28", nil); err != nil {
		t.Errorf("a 2026-07-28 host was refused: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.connectAs(t, userToken, "2025-06-18", nil); err != nil {
		t.Errorf("a session after the first ended: %v", err)
	}
}

// TestSessionConfigIsValidated: max_sessions and session_idle_timeout out
// of range stop the gateway at start, each named.
func TestSessionConfigIsValidated(t *testing.T) {
	for key, v := range map[string]any{"max_sessions": -1, "session_idle_timeout": "48h"} {
		cfg := mcpgate.Config{Policy: "p", StateKeyFile: "k", Principals: map[string]mcpgate.Principal{"u": {}},
			Verdictd: mcpgate.Endpoint{URL: "http://x", Token: "t"}, Executor: mcpgate.Endpoint{URL: "http://x", Token: "t"}}
		b, _ := json.Marshal(map[string]any{key: v})
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v: Validate = %v", key, v, err)
		}
	}
}

// answerValuesDeclineApproval fills in the values a form asks for and
// declines a form that asks for approval.
func answerValuesDeclineApproval(u *user) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if strings.Contains(string(mustJSON(req.Params.RequestedSchema)), `"boolean"`) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return u.answer(ctx, req)
	}
}

// TestDecliningAnApprovalSaysItWasNotApproved: the user who turns down
// the approval form is told the request was not approved, not that
// details are missing, whether asked in place or through input_required.
func TestDecliningAnApprovalSaysItWasNotApproved(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 300}}
			sess, err := g.connectAs(t, userToken, rev, &mcp.ClientOptions{ElicitationHandler: answerValuesDeclineApproval(u)})
			if err != nil {
				t.Fatal(err)
			}
			mark := s.mark(t)
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || reason(res) != "declined" || !strings.Contains(text(res), "did not approve") {
				t.Errorf("want a declined error saying it was not approved, got %q %v", text(res), res.Meta)
			}
			if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
				t.Fatalf("bank saw %d transfer calls without approval", n)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the transport's reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestResultsAreTheGatewaysOwn: what a host of an older revision reads as
// the result of a forwarded or executed call carries no resultType (a
// 2026-07-28 field) and not the upstream's serverInfo: the host talks to
// the gateway, which presents the server by its deployment id.
func TestResultsAreTheGatewaysOwn(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	var wire syncBuffer
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 400}}
	client := mcp.NewClient(&mcp.Implementation{Name: "old-host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: u.answer})
	sess, err := client.Connect(ctxT(t), &mcp.LoggingTransport{Writer: &wire, Transport: &mcp.StreamableClientTransport{
		Endpoint:   g.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: userToken, base: http.DefaultTransport}},
	}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for _, call := range []*mcp.CallToolParams{
		{Name: "bank.get_balance", Arguments: map[string]any{"account": "220-555-010"}},
		{Name: "bank.transfer", Arguments: modelArgs()},
	} {
		res, err := sess.CallTool(ctxT(t), call)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", call.Name, err, res)
		}
	}
	results := 0
	for line := range strings.Lines(wire.String()) {
		if !strings.HasPrefix(line, "read: ") || !strings.Contains(line, `"content"`) {
			continue
		}
		results++
		if strings.Contains(line, `"resultType"`) {
			t.Errorf("a 2025-11-25 host read resultType: %s", line)
		}
		if strings.Contains(line, `"name":"bank"`) {
			t.Errorf("a result names the upstream's own serverInfo: %s", line)
		}
	}
	if results != 2 {
		t.Errorf("saw %d call results on the wire, want 2:\n%s", results, wire.String())
	}
}

// TestStdioGatewayWithATakenPortStops: under --stdio a configured listen
// address that cannot be bound stops the gateway. Serving stdio anyway
// would serve it without the policy watcher, which runs with the HTTP
// server: a tool reclassified as irreversible would keep passing through.
func TestStdioGatewayWithATakenPortStops(t *testing.T) {
	s := bankStack(t)
	dir := t.TempDir()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := s.gatewayConfig(dir)
	cfg["listen"] = taken.Addr().String()
	path := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(path, cfg); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd := exec.Command(bins["mcpgate"], "serve", "--config", path, "--stdio")
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil)
	sess, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err == nil {
		sess.Close()
		t.Fatalf("the gateway served stdio with its listen address taken:\n%s", stderr.String())
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), `"msg":"listen"`) || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("the log does not say the address is taken:\n%s", stderr.String())
	}
	// At the config key that set it, in the file the gateway was started with.
	if !strings.Contains(stderr.String(), path+":") || !strings.Contains(stderr.String(), `listen \"`+taken.Addr().String()+`\" cannot be bound`) {
		t.Errorf("the log does not name the listen key and its file:\n%s", stderr.String())
	}
}

// TestReadyzNeedsVerdictdAndExecutor: /readyz says not ready, and why,
// while verdictd or the executor is unreachable: no irreversible call
// could complete.
func TestReadyzNeedsVerdictdAndExecutor(t *testing.T) {
	s := bankStack(t)
	for _, down := range []string{"verdictd", "executor"} {
		t.Run(down, func(t *testing.T) {
			cfg := s.gatewayConfig(t.TempDir())
			cfg[down] = map[string]string{"url": "http://" + freeAddr(), "token": agentToken}
			g := launchGateway(t, cfg, nil)
			if err := waitOK(g.url+"/healthz", 60*time.Second); err != nil {
				t.Fatalf("%v\n%s", err, readFile(g.log))
			}
			resp, err := http.Get(g.url + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), down+" is not reachable") {
				t.Errorf("/readyz with %s down: %d %s", down, resp.StatusCode, body)
			}
		})
	}
}

// TestSIGTERMIsANormalStop: a gateway stopped the way a service manager
// stops it — SIGTERM to its whole process group, its stdio servers
// included — exits 0 and logs nothing at error level.
func TestSIGTERMIsANormalStop(t *testing.T) {
	s := bankStack(t)
	dir := t.TempDir()
	cfg := s.gatewayConfig(dir)
	// The server runs under a shell, as launchers (npx, scripts) do: the
	// shell ends by the group's SIGTERM, not by an exit status.
	cfg["servers"] = map[string]any{"bank": map[string]any{"command": []string{"sh", "-c",
		bins["bank"] + " --state " + filepath.Join(dir, "bank.json") + "; true"}}}
	g := launchGateway(t, cfg, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} })
	if err := waitReady(g.url, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, readFile(g.log))
	}
	// An older host holds a session, with its event stream open.
	if _, err := g.connectAs(t, userToken, "2025-11-25", nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := g.cmd.Wait()
	log := readFile(g.log)
	if err != nil {
		t.Errorf("gateway exit: %v\n%s", err, log)
	}
	for line := range strings.Lines(log) {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("logged at error level on SIGTERM: %s", line)
		}
	}
	if strings.Contains(log, "http shutdown") {
		t.Errorf("shutdown waited out its limit:\n%s", log)
	}
}

// TestHostThatCannotBeAskedIsToldWhy: an older host that declared no
// elicitation is told the app cannot ask; an older host's request that
// names no session is told its connection has none. Neither runs
// anything, and the log says which it was.
func TestHostThatCannotBeAskedIsToldWhy(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	mark := s.mark(t)

	sess, err := g.connectAs(t, userToken, "2025-11-25", nil) // no elicitation handler: none declared
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if reason(res) != "elicitation_unavailable" || !strings.Contains(text(res), "cannot ask you") {
		t.Errorf("host without elicitation: %q %v", text(res), res.Meta)
	}

	// A tools/call of a 2025-06-18 host that names no session.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": map[string]any{"name": "bank.transfer", "arguments": modelArgs()}})
	req, _ := http.NewRequest(http.MethodPost, g.url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+userToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(answer), "elicitation_unavailable") || !strings.Contains(string(answer), "no session with the gateway") {
		t.Errorf("request without a session: %d %s", resp.StatusCode, answer)
	}

	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Errorf("bank saw %d transfers", n)
	}
	log := readFile(g.log)
	for _, want := range []string{"client did not declare form elicitation", "older client without a session"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}
