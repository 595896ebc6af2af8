// Command execload measures the executor end to end: verdict verification, nonce consumption,
// durable execution records and a call to a fast local MCP tool, under concurrent clients.
//
// It builds the executor and the example bank server, starts them as separate processes on
// loopback with fresh keys in a temporary directory, pre-signs every verdict (signing is
// verdictd's cost, not the executor's), then sends them from -c concurrent clients and prints
// throughput and latency percentiles.
//
//	go run ./bench/execload -n 20000 -c 32
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/verdict"
)

func main() {
	n := flag.Int("n", 20000, "verdicts to execute")
	c := flag.Int("c", 32, "concurrent clients")
	tool := flag.String("tool", "echo", "tool to call: echo (bench/echoserver, measures the executor alone), get_balance or transfer (examples/bank)")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	flag.Parse()
	if err := run(*n, *c, *tool, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "execload:", err)
		os.Exit(1)
	}
}

func run(n, conc int, tool string, keep bool) error {
	dir, err := os.MkdirTemp("", "execload-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("dir:", dir)
	}
	for name, pkg := range map[string]string{"executor": "./cmd/executor", "bank": "./examples/bank", "echo": "./bench/echoserver"} {
		b := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build %s (run from the module root): %w", pkg, err)
		}
	}
	if _, err := keys.Keygen(filepath.Join(dir, "issuer"), jose.EdDSA); err != nil {
		return err
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	server := []string{filepath.Join(dir, "bank"), "--state", filepath.Join(dir, "bank.json")}
	if tool == "echo" {
		server = []string{filepath.Join(dir, "echo")}
	}
	cfg := map[string]any{
		"listen":             addr,
		"data_dir":           filepath.Join(dir, "data"),
		"executor_id":        "executor-bank",
		"trusted_issuers":    []map[string]string{{"issuer": "verdictd", "jwks": filepath.Join(dir, "issuer", "jwks.json")}},
		"receipt_key":        filepath.Join(dir, "receipt", "signing.jwk"),
		"servers":            map[string]any{"bank": map[string]any{"command": server}},
		"callers":            []map[string]string{{"name": "load", "token_sha256": httpx.HashToken("load")}},
		"admin_token_sha256": httpx.HashToken("admin"),
	}
	b, _ := json.Marshal(cfg)
	config := filepath.Join(dir, "executor.yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "executor.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(dir, "executor"), "serve", "--config", config)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	base := "http://" + addr
	if err := waitReady(base); err != nil {
		return err
	}
	tsd, err := toolDigest(base, tool)
	if err != nil {
		return err
	}

	signer, err := keys.LoadSigner(filepath.Join(dir, "issuer", "signing.jwk"))
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
	bodies := make([]string, n)
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

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc}}
	lat := make([]time.Duration, n)
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				req, _ := http.NewRequest("POST", base+"/v1/execute", strings.NewReader(bodies[i]))
				req.Header.Set("Authorization", "Bearer load")
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
	fmt.Printf("executions: %d (non-200: %d) tool=%s clients=%d\n", n, bad.Load(), tool, conc)
	fmt.Printf("throughput: %.0f executions/s over %s\n", float64(n)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	fmt.Printf("latency: p50 %s  p90 %s  p99 %s  max %s\n", pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond),
		pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if bad.Load() > 0 {
		return errors.New("some executions failed; see executor.log (run with -keep)")
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("executor not ready")
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
