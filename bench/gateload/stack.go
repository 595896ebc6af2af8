package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
	"github.com/verdictgate/verdict/internal/httpx"
)

// Tokens of the run; configs keep only their SHA-256.
const (
	hostToken     = "gateload-host"
	gatewayToken  = "gateload-gateway"
	executorToken = "gateload-executor"
	adminToken    = "gateload-admin"
)

// The gated call: the account the principal stored in advance, and what the user said.
const (
	account = "1102534471"
	said    = "Please list my last 5 transactions."
)

// policy is verdictd's and the gateway's policy. The bank's transfer declares a [Verify]
// approval, which is a question by design, so the gated call of the run is list_transactions,
// classed irreversible here: the same path (preflight, verdict, execution records, receipt)
// with every value from a source the call supplies without a question.
const policy = `policy_version: "gateload.1"
servers:
  bank:
    audience: ["executor-gateload"]
    tools_from: {url: "BANK_URL"}
tools:
  bank/list_transactions:
    class: irreversible
    actions: ["list transactions"]
    when_cases: [immediate]
    fields:
      account: {allowed_sources: [pre_set_data]}
      limit: {allowed_sources: [instruction]}
  bank/get_balance:
    class: read
`

// stack is the bank, verdictd, the executor and mcpgate running in dir.
type stack struct {
	dir       string
	bankURL   string             // the bank's streamable HTTP endpoint
	gateURL   string             // the gateway's
	debugAddr map[string]string  // each profiled daemon's debug_listen
	pids      map[string]int     // every process's, by name
	spans     *loadgen.SpanTally // with -spans
	stops     []func()
}

func (s *stack) path(p ...string) string { return filepath.Join(append([]string{s.dir}, p...)...) }

// stop ends every process, the last started first.
func (s *stack) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

// binaries are the programs of a stack, by the package each is built from.
var binaries = map[string]string{"bank": "./examples/bank", "verdictd": "./cmd/verdictd",
	"executor": "./cmd/executor", "mcpgate": "./cmd/mcpgate"}

// buildBase builds the stack's binaries of commit rev into out: it checks rev out into a
// detached worktree under dir and removes it once built, since the binaries are all a stack
// needs of it.
func buildBase(dir, out, rev string) (err error) {
	src := filepath.Join(dir, "base-src")
	if b, err := exec.Command("git", "worktree", "add", "--detach", src, rev).CombinedOutput(); err != nil {
		return fmt.Errorf("git worktree add %s: %w: %s", rev, err, b)
	}
	defer func() {
		if b, rmErr := exec.Command("git", "worktree", "remove", "--force", src).CombinedOutput(); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("git worktree remove %s: %w: %s", src, rmErr, b))
		}
	}()
	if err := os.Mkdir(out, 0o700); err != nil {
		return err
	}
	if err := loadgen.BuildIn(src, out, binaries); err != nil {
		return fmt.Errorf("base %s: %w", rev, err)
	}
	return nil
}

// startStack starts everything from the binaries in dir, with its own ports, keys and data;
// on error what started is stopped.
func startStack(dir string, o options) (_ *stack, err error) {
	s := &stack{dir: dir, debugAddr: map[string]string{}, pids: map[string]int{}}
	if o.cpuprofile != "" {
		for _, d := range o.profile {
			s.debugAddr[d] = ""
		}
	}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	var env []string
	if o.gogc != "" {
		env = append(env, "GOGC="+o.gogc)
	}
	if o.spans {
		if s.spans, err = loadgen.StartSpanTally(); err != nil {
			return nil, err
		}
		s.stops = append(s.stops, s.spans.Close)
		env = append(env, s.spans.Env)
	}
	if err := s.startBank(env); err != nil {
		return nil, err
	}
	for _, name := range []string{"verdictd", "executor"} {
		if out, err := exec.Command(s.path(name), "keygen", "--out", s.path(name+"-keys")).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s keygen: %w: %s", name, err, out)
		}
	}
	if err := os.WriteFile(s.path("policy.yaml"), []byte(strings.ReplaceAll(policy, "BANK_URL", s.bankURL)), 0o600); err != nil {
		return nil, err
	}
	addrs := make([]string, 3)
	for i := range addrs {
		if addrs[i], err = loadgen.FreeAddr(); err != nil {
			return nil, err
		}
	}
	vBase, eBase, gBase := "http://"+addrs[0], "http://"+addrs[1], "http://"+addrs[2]
	if err := s.startDaemon("verdictd", vBase, env, map[string]any{
		"listen":      addrs[0],
		"data_dir":    s.path("verdictd-data"),
		"issuer":      "verdictd-gateload",
		"signing_key": s.path("verdictd-keys", "signing.jwk"),
		"policy":      s.path("policy.yaml"),
		"callers": []map[string]any{
			{"name": "gateway", "token_sha256": httpx.HashToken(gatewayToken), "principals": []string{"*"}},
			{"name": "executor", "token_sha256": httpx.HashToken(executorToken), "principals": []string{}}},
		"admin_token_sha256": httpx.HashToken(adminToken),
		"executors":          []map[string]string{{"issuer": "executor-gateload", "jwks": s.path("executor-keys", "jwks.json")}},
	}); err != nil {
		return nil, err
	}
	if err := s.startDaemon("executor", eBase, env, map[string]any{
		"listen":             addrs[1],
		"data_dir":           s.path("executor-data"),
		"executor_id":        "executor-gateload",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd-gateload", "jwks": vBase + "/.well-known/jwks.json"}},
		"receipt_key":        s.path("executor-keys", "signing.jwk"),
		"servers":            map[string]any{"bank": map[string]string{"url": s.bankURL}},
		"callers":            []httpx.Token{{Name: "gateway", TokenSHA256: httpx.HashToken(gatewayToken)}},
		"admin_token_sha256": httpx.HashToken(adminToken),
		"verdictd":           map[string]string{"url": vBase, "token": executorToken},
	}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.path("state.key"), []byte("gateload-state-key-0123456789abcdef"), 0o600); err != nil {
		return nil, err
	}
	if err := s.startDaemon("mcpgate", gBase, env, map[string]any{
		"listen":         addrs[2],
		"policy":         s.path("policy.yaml"),
		"verdictd":       map[string]string{"url": vBase, "token": gatewayToken},
		"executor":       map[string]string{"url": eBase, "token": gatewayToken},
		"state_key_file": s.path("state.key"),
		// The run is one user starting gated calls as fast as the stack answers.
		"state": map[string]any{"calls_per_minute": 1 << 30, "call_burst": 1 << 30},
		"principals": map[string]any{
			"u_01": map[string]any{"token_sha256": httpx.HashToken(hostToken),
				"pre_set_data": map[string]any{"account": account}},
		},
		"tools": map[string]any{
			"bank/list_transactions": map[string]any{"action_name_preset": "list transactions", "when_case": "immediate"},
		},
	}); err != nil {
		return nil, err
	}
	s.gateURL = gBase + "/mcp"
	return s, nil
}

// startDaemon writes cfg as name's config and starts "name serve" until it is ready.
func (s *stack) startDaemon(name, base string, env []string, cfg map[string]any) error {
	if _, ok := s.debugAddr[name]; ok {
		addr, err := loadgen.FreeAddr()
		if err != nil {
			return err
		}
		s.debugAddr[name] = addr
		cfg["debug_listen"] = addr
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.path(name+".yaml"), b, 0o600); err != nil {
		return err
	}
	d, err := loadgen.StartDaemon(s.path(name), s.path(name+".log"), base, env, "serve", "--config", s.path(name+".yaml"))
	if err != nil {
		return err
	}
	s.stops = append(s.stops, d.Stop)
	s.pids[name] = d.Pid()
	return nil
}

// startBank runs the bank on a free port and reads its endpoint from the line it prints.
func (s *stack) startBank(env []string) error {
	cmd := exec.Command(s.path("bank"), "--http", "127.0.0.1:0", "--state", s.path("bank.json"))
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.stops = append(s.stops, func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	s.pids["bank"] = cmd.Process.Pid
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
			s.bankURL = strings.TrimSpace(url)
			go io.Copy(io.Discard, stderr)
			return nil
		}
	}
	return errors.New("the bank exited before it listened")
}
