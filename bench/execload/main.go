// Command execload measures the executor end to end: verdict verification, nonce consumption,
// durable execution records and a call to a fast local MCP tool, under concurrent clients.
//
// It builds the executor and the example bank server, starts them as separate processes on
// loopback with fresh keys in a temporary directory, pre-signs every verdict (signing is
// verdictd's cost, not the executor's), then sends them from -c concurrent clients and prints
// throughput and latency percentiles, and the CPU each request cost the executor, the tool
// server it started and the load generator.
//
//	go run ./bench/execload -n 20000 -c 32
//
// -tool echo calls bench/echoserver's minimal MCP server, so that little of the machine goes to
// the tool; -tool echo-sdk calls the same tool served by the go-sdk, to compare.
//
// With -nonce etcd the executor keeps its nonces in etcd instead of its bbolt file: in the
// cluster at -etcd, or in a private single-member etcd (the etcd binary in PATH) started on
// loopback for the run.
//
//	go run ./bench/execload -n 20000 -c 32 -nonce etcd
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/verdict"
)

func main() {
	l := loadgen.NewDaemonLoad("execload", "executor", "the executor", "verdicts to execute")
	tool := flag.String("tool", "echo", "tool to call: echo (bench/echoserver's minimal server, measures the executor alone), echo-sdk (the same tool served by the go-sdk), get_balance or transfer (examples/bank)")
	nonceStore := flag.String("nonce", "bbolt", "nonce store: bbolt (the executor's file) or etcd")
	etcdEndpoint := flag.String("etcd", "", "with -nonce etcd, the etcd client `URL` (default: start a private etcd)")
	flag.Parse()
	if *nonceStore != "bbolt" && *nonceStore != "etcd" {
		fmt.Fprintln(os.Stderr, "execload: -nonce must be bbolt or etcd")
		os.Exit(2)
	}
	pkgs := map[string]string{"executor": "./cmd/executor", "bank": "./examples/bank", "echo": "./bench/echoserver"}
	l.Main(pkgs, func() error { return run(l, *tool, *nonceStore, *etcdEndpoint) })
}

func run(l *loadgen.DaemonLoad, tool, nonceStore, etcdEndpoint string) error {
	if _, err := keys.Keygen(l.Path("issuer"), jose.EdDSA); err != nil {
		return err
	}
	if _, err := keys.Keygen(l.Path("receipt"), jose.EdDSA); err != nil {
		return err
	}
	addr, err := loadgen.FreeAddr()
	if err != nil {
		return err
	}
	server := []string{l.Path("bank"), "--state", l.Path("bank.json")}
	switch tool {
	case "echo":
		server = []string{l.Path("echo")}
	case "echo-sdk":
		// The same tool, named echo upstream; only the server binary differs.
		server = []string{l.Path("echo"), "-sdk"}
	}
	name := tool // the label printed for the run
	if tool == "echo-sdk" {
		tool = "echo"
	}
	cfg := map[string]any{
		"listen":             addr,
		"data_dir":           l.Path("data"),
		"executor_id":        "executor-bank",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd", "jwks": l.Path("issuer", "jwks.json")}},
		"receipt_key":        l.Path("receipt", "signing.jwk"),
		"servers":            map[string]any{"bank": map[string]any{"command": server}},
		"callers":            []map[string]string{{"name": "load", "token_sha256": httpx.HashToken("load")}},
		"admin_token_sha256": httpx.HashToken("admin"),
	}
	if nonceStore == "etcd" {
		if etcdEndpoint == "" {
			stopEtcd, ep, err := startEtcd(l.Dir)
			if err != nil {
				return err
			}
			l.Defer(stopEtcd)
			etcdEndpoint = ep
		}
		cfg["nonce_store"] = map[string]any{"kind": "etcd", "endpoints": []string{etcdEndpoint}, "prefix": "/execload/" + filepath.Base(l.Dir) + "/"}
	}
	base, err := l.Start(cfg)
	if err != nil {
		return err
	}
	tsd, err := toolDigest(base, tool)
	if err != nil {
		return err
	}

	signer, err := keys.LoadSigner(l.Path("issuer", "signing.jwk"))
	if err != nil {
		return err
	}
	args := `{"account":"1102534471"}`
	if tool == "transfer" {
		args = `{"amount":1,"from_account":"1102534471","to_account":"110-222-333"}`
	}
	digest, err := canonical.DigestJSON([]byte(args))
	if err != nil {
		return err
	}
	bodies := make([]string, l.N)
	now := time.Now().Unix()
	for i := range bodies {
		jti, _ := verdict.NewID()
		tok, err := verdict.Sign(signer, verdict.Claims{
			Issuer: "verdictd", Subject: "u_01", Audience: []string{"executor-bank"}, IssuedAt: now, NotBefore: now,
			Expiry: now + 600, ID: jti, Server: "bank", Tool: tool, ToolDigest: tsd, Policy: "bench",
			Arguments: digest, Slots: []verdict.Slot{}, ActionKey: "u_01:bench:bank/" + tool, Phase: "at_trigger", Record: "rec_bench",
		})
		if err != nil {
			return err
		}
		bodies[i] = fmt.Sprintf(`{"verdict":%q,"arguments":%s}`, tok, args)
	}
	return l.Load("/v1/execute", "executions of "+name+" (nonces in "+nonceStore+")", bodies, nil)
}

func toolDigest(base, tool string) (string, error) {
	req, _ := http.NewRequest("GET", base+"/v1/catalog", nil)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var cat struct {
		Servers []struct {
			Tools []struct{ Name, TSD string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil {
		return "", err
	}
	for _, s := range cat.Servers {
		for _, t := range s.Tools {
			if t.Name == tool {
				return t.TSD, nil
			}
		}
	}
	return "", fmt.Errorf("tool %s not in catalog", tool)
}

// startEtcd runs a private single-member etcd with its data in dir, on free loopback ports.
func startEtcd(dir string) (stop func(), endpoint string, err error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, "", fmt.Errorf("-nonce etcd without -etcd needs an etcd binary in PATH: %w", err)
	}
	client, err := loadgen.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	peer, err := loadgen.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	endpoint = "http://" + client
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--name", "execload", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "execload=http://"+peer, "--logger", "zap", "--log-outputs", "stderr")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() }
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(endpoint + "/health")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`) {
			return stop, endpoint, nil
		}
	}
	stop()
	return nil, "", fmt.Errorf("etcd at %s not healthy after 30s (see %s)", endpoint, logf.Name())
}
