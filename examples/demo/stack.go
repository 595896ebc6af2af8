package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/httpx"
)

// Tokens of the demo's callers. A real deployment keeps only their SHA-256 in its configs.
const (
	agentToken = "demo-agent-token"
	adminToken = "demo-admin-token"
	execToken  = "demo-executor-token"
)

// demo is the running stack.
type demo struct {
	dir      string
	keep     bool
	procs    []*exec.Cmd
	logs     []*os.File
	verdictd string // base URLs
	executor string
	bankURL  string
	vd, ex   *client.Client // the agent's clients of verdictd and the executor

	// stdio makes both daemons start their own bank child over stdio instead of sharing one
	// bank over streamable HTTP.
	stdio bool
	// gateway drives the transfer through mcpgate from an MCP host instead of calling the
	// daemons directly; gatewayURL is mcpgate's base URL once it runs.
	gateway    bool
	gatewayURL string
	// verdictTTL and clockSkew override the daemons' defaults ("" keeps them).
	verdictTTL string
	clockSkew  string
	// verdictdExtra, when set, is merged into verdictd's config (a test's approvers section);
	// editPolicy, when set, rewrites the example policy before it is written.
	verdictdExtra map[string]any
	editPolicy    func([]byte) []byte
}

func newDemo(keep bool) (*demo, error) {
	dir, err := os.MkdirTemp("", "verdict-demo-")
	if err != nil {
		return nil, err
	}
	return &demo{dir: dir, keep: keep}, nil
}

func (d *demo) path(p ...string) string { return filepath.Join(append([]string{d.dir}, p...)...) }

func (d *demo) stop() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
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
	for _, f := range d.logs {
		f.Close()
	}
	if d.keep {
		fmt.Println("\nkept:", d.dir)
	} else {
		os.RemoveAll(d.dir)
	}
}

// build compiles the programs from this module: the three, and mcpgate in gateway mode.
func (d *demo) build() error {
	progs := []struct{ name, pkg string }{
		{"verdictd", "./cmd/verdictd"}, {"executor", "./cmd/executor"}, {"bank", "./examples/bank"},
	}
	if d.gateway {
		progs = append(progs, struct{ name, pkg string }{"mcpgate", "./cmd/mcpgate"})
	}
	for _, p := range progs {
		cmd := exec.Command("go", "build", "-o", d.path("bin", p.name), p.pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s (run the demo from the repository root): %w", p.pkg, err)
		}
	}
	return nil
}

// serve starts the daemon name on its config, which listens on addr, with its output in a log
// file, and returns its base URL once it is ready.
func (d *demo) serve(name, addr string) (string, error) {
	logf, err := os.Create(d.path(name + ".log"))
	if err != nil {
		return "", err
	}
	d.logs = append(d.logs, logf)
	cmd := exec.Command(d.path("bin", name), "serve", "--config", d.path(name+".yaml"))
	cmd.Stderr = logf
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	d.procs = append(d.procs, cmd)
	url := "http://" + addr
	return url, waitReady(url)
}

func (d *demo) keygen(name string) error {
	out, err := exec.Command(d.path("bin", name), "keygen", "--out", d.path(name+"-keys")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s keygen: %v: %s", name, err, out)
	}
	return nil
}

// startBank runs the bank over streamable HTTP and waits for its address.
func (d *demo) startBank() error {
	logf, err := os.Create(d.path("bank.log"))
	if err != nil {
		return err
	}
	d.logs = append(d.logs, logf)
	cmd := exec.Command(d.path("bin", "bank"), "--http", "127.0.0.1:0", "--state", d.path("bank.json"), "--log", d.path("bank-calls.jsonl"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.procs = append(d.procs, cmd)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		fmt.Fprintln(logf, sc.Text())
		if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
			d.bankURL = strings.TrimSpace(url)
			go io.Copy(logf, stderr)
			return nil
		}
	}
	return errors.New("bank did not start; see bank.log")
}

func freeAddr() (string, error) {
	addrs, err := freeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// freeAddrs returns n loopback addresses nobody listens on now, all different: each is held
// until the last is chosen, since a port just closed can be handed out again.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// configure writes the policy and both daemons' configs.
func (d *demo) configure() (vAddr, eAddr string, err error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return "", "", err
	}
	vAddr, eAddr = addrs[0], addrs[1]
	policy, err := os.ReadFile("examples/policy.yaml")
	if err != nil {
		return "", "", fmt.Errorf("read the example policy (run the demo from the repository root): %w", err)
	}
	bankServer := map[string]any{"url": d.bankURL}
	if d.stdio {
		argv := []string{d.path("bin", "bank"), "--state", d.path("bank.json"), "--log", d.path("bank-calls.jsonl")}
		bankServer = map[string]any{"command": argv}
		b, _ := json.Marshal(argv)
		policy = bytes.Replace(policy, []byte(`{url: "http://127.0.0.1:8790/mcp"}`), []byte(`{command: `+string(b)+`}`), 1)
	} else {
		policy = bytes.Replace(policy, []byte("http://127.0.0.1:8790/mcp"), []byte(d.bankURL), 1)
	}
	if d.editPolicy != nil {
		policy = d.editPolicy(policy)
	}
	if err = os.WriteFile(d.path("policy.yaml"), policy, 0o600); err != nil {
		return
	}
	vCallers := []map[string]any{
		{"name": "agent", "token_sha256": httpx.HashToken(agentToken), "principals": []string{"*"}},
		{"name": "executor", "token_sha256": httpx.HashToken(execToken), "principals": []string{}}}
	xCallers := []executor.Caller{{Name: "agent", TokenSHA256: httpx.HashToken(agentToken)}}
	if d.gateway {
		// The gateway starts each call's trace itself, a host's only linked: verdictd continues it.
		vCallers = append(vCallers, map[string]any{"name": "mcpgate", "token_sha256": httpx.HashToken(gatewayToken),
			"principals": []string{"u_01"}, "trust_trace_context": true})
		xCallers = append(xCallers, executor.Caller{Name: "mcpgate", TokenSHA256: httpx.HashToken(gatewayToken), TrustTraceContext: true})
	}
	vcfg := map[string]any{
		"listen":             vAddr,
		"data_dir":           d.path("verdictd-data"),
		"issuer":             "verdictd-demo",
		"signing_key":        d.path("verdictd-keys", "signing.jwk"),
		"policy":             d.path("policy.yaml"),
		"verdict_ttl":        cmp.Or(d.verdictTTL, "60s"),
		"callers":            vCallers,
		"admin_token_sha256": httpx.HashToken(adminToken),
		"executors":          []map[string]string{{"issuer": "executor-bank", "jwks": d.path("executor-keys", "jwks.json")}},
	}
	maps.Copy(vcfg, d.verdictdExtra)
	if err = writeJSON(d.path("verdictd.yaml"), vcfg); err != nil {
		return
	}
	err = writeJSON(d.path("executor.yaml"), map[string]any{
		"listen":             eAddr,
		"data_dir":           d.path("executor-data"),
		"executor_id":        "executor-bank",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd-demo", "jwks": "http://" + vAddr + "/.well-known/jwks.json"}},
		"receipt_key":        d.path("executor-keys", "signing.jwk"),
		"servers":            map[string]any{"bank": bankServer},
		"clock_skew":         cmp.Or(d.clockSkew, "5s"),
		"callers":            xCallers,
		"admin_token_sha256": httpx.HashToken(adminToken),
		"verdictd":           map[string]string{"url": "http://" + vAddr, "token": execToken},
	})
	return
}

func waitReady(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			last = string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready: %s", base, last)
}
