package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/verdict"
)

// bins holds the binaries built once for the whole package: verdictd, executor, bank and
// echoserver. A command that does not build fails the whole package before any test runs: no
// test passes by not running.
var bins = map[string]string{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verdict-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pkgs := map[string]string{
		"verdictd":   "github.com/verdictgate/verdict/cmd/verdictd",
		"executor":   "github.com/verdictgate/verdict/cmd/executor",
		"bank":       "github.com/verdictgate/verdict/examples/bank",
		"echoserver": "github.com/verdictgate/verdict/bench/echoserver",
	}
	for name, pkg := range pkgs {
		if err := build(dir, name, pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	opCmd.Remove()
	gatewayCmd.Remove()
	consoleCmd.Remove()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir, name, pkg string) error {
	out, err := testbin.Build(dir, name, pkg)
	if err != nil {
		return err
	}
	bins[name] = out
	return nil
}

const (
	callerToken = "e2e-caller-token"
	adminToken  = "e2e-admin-token"
	issuerID    = "verdictd-e2e"
	executorID  = "executor-bank"
	principal   = "u_01"
	actionKey   = "u_01:send money:bank/transfer"
)

// issuer is a verdictd signing identity held by the test: the raw Ed25519 key is kept so that
// the adversarial corpus can forge tokens with headers no Signer would write.
type issuer struct {
	id     string
	priv   ed25519.PrivateKey
	signer *keys.Signer
	jwks   string // path of the public set
}

func newIssuer(t testing.TB, dir, id string) *issuer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := keys.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	set, err := keys.NewSet(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, id+".jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return &issuer{id: id, priv: priv, signer: s, jwks: path}
}

func (is *issuer) kid() string { return is.signer.KeyID() }

// claims returns valid claims for a call of server/tool with the given arguments digest.
func (is *issuer) claims(t testing.TB, tsd, argsDigest string) verdict.Claims {
	t.Helper()
	jti, err := verdict.NewID()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	return verdict.Claims{
		Issuer: is.id, Subject: principal, Audience: []string{executorID},
		IssuedAt: now, NotBefore: now, Expiry: now + 300, ID: jti,
		Server: "bank", Tool: "transfer", ToolDigest: tsd, Policy: "e2e.1",
		Arguments: argsDigest, Slots: []verdict.Slot{{ID: "amount", Status: "known", Source: strPtr("instruction")}},
		ActionKey: actionKey, Phase: "at_trigger", Record: "rec_e2e",
	}
}

func strPtr(s string) *string { return &s }

// sign signs a verdict over args (a JSON object) and returns the token and its jti.
func (is *issuer) sign(t testing.TB, tsd string, args []byte) (token, jti string) {
	t.Helper()
	digest, err := canonical.DigestJSON(args)
	if err != nil {
		t.Fatalf("digest %s: %v", args, err)
	}
	c := is.claims(t, tsd, digest)
	tok, err := verdict.Sign(is.signer, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c.ID
}

// execConfig is an executor configuration with one bank server behind it.
type execConfig struct {
	dir      string
	addr     string
	path     string // the config file
	dataDir  string
	bankLog  string
	issuer   *issuer
	extra    map[string]any // merged into the config file
	bankArgs []string
}

func newExecConfig(t testing.TB, bankArgs ...string) *execConfig {
	t.Helper()
	dir := t.TempDir()
	c := &execConfig{
		dir:      dir,
		addr:     freeAddr(t),
		path:     filepath.Join(dir, "executor.yaml"),
		dataDir:  filepath.Join(dir, "data"),
		bankLog:  filepath.Join(dir, "bank.log"),
		issuer:   newIssuer(t, dir, issuerID),
		bankArgs: bankArgs,
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	return c
}

// write writes the config file, with extra trusted issuers if given.
func (c *execConfig) write(t testing.TB, more ...map[string]string) {
	t.Helper()
	bank := append([]string{bins["bank"], "--state", filepath.Join(c.dir, "bank.json"), "--log", c.bankLog}, c.bankArgs...)
	issuers := []map[string]string{{"issuer": c.issuer.id, "jwks": c.issuer.jwks}}
	issuers = append(issuers, more...)
	cfg := map[string]any{
		"listen":             c.addr,
		"data_dir":           c.dataDir,
		"executor_id":        executorID,
		"trusted_issuers":    issuers,
		"receipt_key":        filepath.Join(c.dir, "receipt", keys.PrivateKeyFile),
		"servers":            map[string]any{"bank": map[string]any{"command": bank}},
		"callers":            []map[string]string{{"name": "gate", "token_sha256": httpx.HashToken(callerToken)}},
		"admin_token_sha256": httpx.HashToken(adminToken),
		"call_timeout":       "20s",
	}
	for k, v := range c.extra {
		cfg[k] = v
	}
	writeJSON(t, c.path, cfg)
}

// daemon is a running daemon process.
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	stderr *os.File
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, once done
}

// startDaemon runs bin with args, logging to a file, and waits until /readyz answers 200.
func startDaemon(t testing.TB, bin, addr, logPath string, args ...string) *daemon {
	t.Helper()
	d := spawn(t, bin, addr, logPath, args...)
	waitPath(t, d, "/readyz", logPath)
	return d
}

// spawn starts bin with args, its output appended to logPath; the process is killed at the end
// of the test if it is still running.
func spawn(t testing.TB, bin, addr, logPath string, args ...string) *daemon {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, addr: addr, stderr: f, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); f.Close(); close(d.done) }()
	t.Cleanup(d.kill)
	return d
}

// waitPath polls path until it answers 200, failing if the process exits first.
func waitPath(t testing.TB, d *daemon, path, logPath string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !d.alive() {
			t.Fatalf("%s exited before %s answered (%v); log %s:\n%s", filepath.Base(d.cmd.Path), path, d.err, logPath, tail(logPath))
		}
		resp, err := client.Get("http://" + d.addr + path)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %s never answered 200; log %s:\n%s", filepath.Base(d.cmd.Path), path, logPath, tail(logPath))
}

func mustUnmarshal(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func startExecutor(t testing.TB, c *execConfig) *daemon {
	t.Helper()
	return startDaemon(t, bins["executor"], c.addr, filepath.Join(c.dir, "executor.log"), "serve", "--config", c.path)
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *daemon) kill() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop asks for a graceful shutdown and waits for it.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.kill()
		t.Fatal("daemon did not stop within 30s of SIGTERM")
	}
	if d.err != nil {
		t.Fatalf("daemon exited with %v", d.err)
	}
}

// alive reports whether the process is still running.
func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// toolDigest asks a running executor for the tsd of bank/transfer as it lists it now.
func toolDigest(t testing.TB, addr, server, tool string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/catalog", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cat struct {
		Servers []struct {
			ID    string
			Tools []struct{ Name, Tsd string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	for _, s := range cat.Servers {
		for _, tl := range s.Tools {
			if s.ID == server && tl.Name == tool && tl.Tsd != "" {
				return tl.Tsd
			}
		}
	}
	t.Fatalf("%s/%s not in the executor's catalog", server, tool)
	return ""
}

// callLogLine is one line of the bank's call log.
type callLogLine struct {
	PID       int    `json:"pid"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
}

// tb is what both *testing.T and *rapid.T offer, for helpers shared by tests and properties.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// readCallLog returns the lines of the bank's call log; a missing log has none.
func readCallLog(t tb, path string) []callLogLine {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []callLogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var l callLogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("call log line %q: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitForOrphans waits until no process whose command line mentions dir is left: a stdio MCP
// server whose executor was killed finishes reading its pipe (and logging what it got) before it
// exits, and the call log is only complete once it has.
func waitForOrphans(t testing.TB, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if len(processesMentioning(dir)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("processes still running from %s: %v", dir, processesMentioning(dir))
}

func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 { // gone, or a zombie
			continue
		}
		if strings.Contains(string(b), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// client posts to a daemon with a caller token.
type client struct {
	http  *http.Client
	base  string
	token string
}

func newClient(addr, token string, timeout time.Duration) *client {
	return &client{
		http:  &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		base:  "http://" + addr,
		token: token,
	}
}

// response is a daemon's answer: status 0 means no answer (connection refused or reset, or the
// client timed out).
type response struct {
	status int
	body   []byte
	err    error
}

func (c *client) do(ctx context.Context, method, path string, body []byte) response {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: b, err: err}
}

// errorCode returns the contract error code of a response body, or "".
func (r response) errorCode() string {
	var e struct {
		Error struct{ Code string }
	}
	json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// executeBody is the body of POST /v1/execute.
func executeBody(token string, args []byte) []byte {
	return fmt.Appendf(nil, `{"verdict":%q,"arguments":%s}`, token, args)
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
