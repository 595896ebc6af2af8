package mcpgate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
)

// bins are the programs the tests run as real processes, built on first
// need (fuzzing runs no test and builds nothing).
var (
	bins     = map[string]string{}
	binDir   string
	binsOnce sync.Once
	binsErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	opCmd.Remove()
	os.Exit(code)
}

func buildBins(t testing.TB) {
	t.Helper()
	binsOnce.Do(func() {
		if binDir, binsErr = os.MkdirTemp("", "mcpgate-test-bin-"); binsErr != nil {
			return
		}
		for name, pkg := range map[string]string{
			"verdictd": "github.com/verdictgate/verdict/cmd/verdictd",
			"executor": "github.com/verdictgate/verdict/cmd/executor",
			"bank":     "github.com/verdictgate/verdict/examples/bank",
			"mcpgate":  "github.com/verdictgate/verdict/cmd/mcpgate",
		} {
			if bins[name], binsErr = testbin.Build(binDir, name, pkg); binsErr != nil {
				return
			}
		}
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
}

// Tokens of the test callers. Configs keep only their SHA-256.
const (
	agentToken = "mcpgate-test-agent"
	adminToken = "mcpgate-test-admin"
	execToken  = "mcpgate-test-executor-to-verdictd"
	userToken  = "mcpgate-test-user-u01"
	otherToken = "mcpgate-test-user-u02"
)

// stack is verdictd and the executor (and, for the bank, the bank server)
// running as separate processes in a temporary directory.
type stack struct {
	dir      string
	procs    []*exec.Cmd
	logs     []*os.File
	bankURL  string
	bankLog  string
	verdictd string
	executor string
	// verdictdConfig and executorConfig, if set, are merged into verdictd's
	// and the executor's configs before they start.
	verdictdConfig, executorConfig map[string]any
}

var (
	sharedOnce sync.Once
	shared     *stack
	sharedErr  error
)

// bankStack returns the stack over the bank shared by the tests of this
// package. Tests read the bank's call log from an offset, so they must
// not run in parallel with each other.
func bankStack(t testing.TB) *stack {
	t.Helper()
	buildBins(t)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpgate-bank-")
		if err != nil {
			sharedErr = err
			return
		}
		s := &stack{dir: dir}
		if sharedErr = s.startBank(); sharedErr != nil {
			s.stop()
			return
		}
		policy, err := os.ReadFile("testdata/policy.yaml")
		if err != nil {
			sharedErr = err
			s.stop()
			return
		}
		policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(s.bankURL))
		if sharedErr = s.startGate(policy, map[string]any{"bank": map[string]string{"url": s.bankURL}}); sharedErr != nil {
			s.stop()
			return
		}
		shared = s
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func (s *stack) path(p ...string) string { return filepath.Join(append([]string{s.dir}, p...)...) }

func (s *stack) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		stopProc(s.procs[i])
	}
	for _, f := range s.logs {
		f.Close()
	}
	os.RemoveAll(s.dir)
}

func stopProc(p *exec.Cmd) {
	p.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Process.Kill()
		<-done
	}
}

func (s *stack) start(name string, args ...string) error {
	logf, err := os.Create(s.path(name + ".log"))
	if err != nil {
		return err
	}
	s.logs = append(s.logs, logf)
	cmd := exec.Command(bins[name], args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// restart stops the process of name that s started, runs between while it is down, and starts
// it again with the same arguments and log, until base answers ready: what it keeps in its
// files outlives it, as across a redeploy.
func (s *stack) restart(t testing.TB, name, base string, between func()) {
	t.Helper()
	i := slices.IndexFunc(s.procs, func(p *exec.Cmd) bool { return p.Path == bins[name] })
	if i < 0 {
		t.Fatalf("no %s runs", name)
	}
	old := s.procs[i]
	stopProc(old)
	between()
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Stdout, cmd.Stderr = old.Stdout, old.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s again: %v", name, err)
	}
	s.procs[i] = cmd
	if err := waitReady(base, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path(name+".log")))
	}
}

// startBank runs the bank over HTTP in s's directory, with the test knobs
// in knobs (see examples/bank), and sets bankURL and bankLog.
func (s *stack) startBank(knobs ...string) error {
	s.bankLog = s.path("bank-calls.jsonl")
	cmd, url, err := runBank("127.0.0.1:0", s.path("bank.json"), s.bankLog, knobs...)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, cmd)
	s.bankURL = url
	return nil
}

// runBank starts the example bank serving streamable HTTP on addr ("127.0.0.1:0": any free
// port) with its state and call log files, and waits until it listens: the process, and the
// URL it serves.
func runBank(addr, state, log string, knobs ...string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bins["bank"], append([]string{"--http", addr, "--state", state, "--log", log}, knobs...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go io.Copy(io.Discard, stderr)
			return cmd, strings.TrimSpace(url), nil
		}
	}
	cmd.Process.Kill()
	return nil, "", fmt.Errorf("bank did not start on %s: %v", addr, cmd.Wait())
}

// startGate generates keys and starts verdictd and the executor over
// policy, the executor reaching the tool servers as servers says.
func (s *stack) startGate(policy []byte, servers map[string]any) error {
	for _, name := range []string{"verdictd", "executor"} {
		out, err := exec.Command(bins[name], "keygen", "--out", s.path(name+"-keys")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s keygen: %v: %s", name, err, out)
		}
	}
	if err := os.WriteFile(s.path("policy.yaml"), policy, 0o600); err != nil {
		return err
	}
	addrs := freeAddrs(2)
	vAddr, eAddr := addrs[0], addrs[1]
	if l, ok := s.executorConfig["listen"].(string); ok {
		// An executor config that names its address keeps it (its connect pages' URL names it).
		if vAddr == l {
			vAddr = eAddr
		}
		eAddr = l
	}
	vcfg := map[string]any{
		"listen":      vAddr,
		"data_dir":    s.path("verdictd-data"),
		"issuer":      "verdictd-mcpgate-test",
		"signing_key": s.path("verdictd-keys", "signing.jwk"),
		"policy":      s.path("policy.yaml"),
		"callers": []map[string]any{
			{"name": "gateway", "token_sha256": httpx.HashToken(agentToken), "principals": []string{"*"}},
			{"name": "executor", "token_sha256": httpx.HashToken(execToken), "principals": []string{}}},
		"admin_token_sha256": httpx.HashToken(adminToken),
		"executors":          []map[string]string{{"issuer": "executor-test", "jwks": s.path("executor-keys", "jwks.json")}},
	}
	maps.Copy(vcfg, s.verdictdConfig)
	if err := writeJSON(s.path("verdictd.yaml"), vcfg); err != nil {
		return err
	}
	ecfg := map[string]any{
		"listen":             eAddr,
		"data_dir":           s.path("executor-data"),
		"executor_id":        "executor-test",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd-mcpgate-test", "jwks": "http://" + vAddr + "/.well-known/jwks.json"}},
		"receipt_key":        s.path("executor-keys", "signing.jwk"),
		"servers":            servers,
		"callers":            []httpx.Token{{Name: "gateway", TokenSHA256: httpx.HashToken(agentToken)}},
		"admin_token_sha256": httpx.HashToken(adminToken),
		"verdictd":           map[string]string{"url": "http://" + vAddr, "token": execToken},
	}
	maps.Copy(ecfg, s.executorConfig)
	if err := writeJSON(s.path("executor.yaml"), ecfg); err != nil {
		return err
	}
	if err := s.start("verdictd", "serve", "--config", s.path("verdictd.yaml")); err != nil {
		return err
	}
	s.verdictd = "http://" + vAddr
	if err := waitReady(s.verdictd, 60*time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, readFile(s.path("verdictd.log")))
	}
	if err := s.start("executor", "serve", "--config", s.path("executor.yaml")); err != nil {
		return err
	}
	s.executor = "http://" + eAddr
	if err := waitReady(s.executor, 60*time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, readFile(s.path("executor.log")))
	}
	return nil
}

// gatewayConfig is the gateway config the tests start from.
func (s *stack) gatewayConfig(dir string) map[string]any {
	key := filepath.Join(dir, "state.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-test-key"), 0o600); err != nil {
		panic(err)
	}
	return map[string]any{
		"listen":         freeAddr(),
		"policy":         s.path("policy.yaml"),
		"verdictd":       map[string]string{"url": s.verdictd, "token": agentToken},
		"executor":       map[string]string{"url": s.executor, "token": agentToken},
		"state_key_file": key,
		"principals": map[string]any{
			"u_01": map[string]any{"token_sha256": httpx.HashToken(userToken),
				"pre_set_data": map[string]any{"from_account": "1102534471"}},
			"u_02": map[string]any{"token_sha256": httpx.HashToken(otherToken)},
		},
		"stdio_principal": "u_01",
		"tools": map[string]any{
			"bank/transfer": map[string]any{"action_name_preset": "send money", "when_case": "immediate"},
		},
	}
}

// gateway is one running mcpgate process.
type gateway struct {
	url    string
	log    string
	config string
	cmd    *exec.Cmd
}

// startGateway writes cfg and runs mcpgate serve on it until the test
// ends, and waits for it to be ready.
func startGateway(t testing.TB, cfg map[string]any, extra ...string) *gateway {
	t.Helper()
	g := launchGateway(t, cfg, nil, extra...)
	if err := waitReady(g.url, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, readFile(g.log))
	}
	return g
}

// launchGateway writes cfg and runs mcpgate serve on it until the test
// ends, setup (if not nil) adjusting the command first. It does not wait
// for the gateway to answer.
func launchGateway(t testing.TB, cfg map[string]any, setup func(*exec.Cmd), extra ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{config: filepath.Join(dir, "mcpgate.yaml"), log: filepath.Join(dir, "mcpgate.log")}
	if err := writeJSON(g.config, cfg); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(g.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins["mcpgate"], append([]string{"serve", "--config", g.config}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.cmd = cmd
	t.Cleanup(func() {
		stopProc(cmd)
		logf.Close()
		if t.Failed() {
			t.Logf("mcpgate log:\n%s", readFile(g.log))
		}
	})
	g.url = "http://" + cfg["listen"].(string)
	return g
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP session to the gateway as the host of the user
// whose token is given.
func (g *gateway) connect(t testing.TB, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, opts)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   g.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// metric returns the value of one series on the gateway's /metrics, or
// -1 when it is absent.
func (g *gateway) metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			var v float64
			fmt.Sscan(val, &v)
			return v
		}
	}
	return -1
}

// bankCall is one line of the bank's call log.
type bankCall struct {
	Tool           string          `json:"tool"`
	Actor          string          `json:"actor"` // the signed-in user the call came from, if the bank signs users in
	Arguments      string          `json:"arguments"`
	Traceparent    string          `json:"traceparent"`
	InputResponses json.RawMessage `json:"input_responses"`
}

// calls returns the bank's tools/call arrivals from line from on, and the
// number of lines read.
func (s *stack) calls(t testing.TB, from int) ([]bankCall, int) {
	t.Helper()
	b, err := os.ReadFile(s.bankLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(b) == 0 {
		lines = nil
	}
	var out []bankCall
	for i, l := range lines {
		if i < from {
			continue
		}
		var c bankCall
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out, len(lines)
}

func (s *stack) mark(t testing.TB) int {
	_, n := s.calls(t, 0)
	return n
}

func only(calls []bankCall, tool string) []bankCall {
	var out []bankCall
	for _, c := range calls {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

func freeAddr() string { return freeAddrs(1)[0] }

// freeAddrs returns n loopback addresses nobody listens on now, all different: each is held
// until the last is chosen, since a port just closed can be handed out again.
func freeAddrs(n int) []string {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func waitReady(base string, limit time.Duration) error { return waitOK(base+"/readyz", limit) }

// waitOK polls url until it answers 200.
func waitOK(url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = string(b)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: not 200: %s", url, last)
}

var b64 = base64.RawURLEncoding
