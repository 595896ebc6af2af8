// Command preflightload measures verdictd end to end: preflights that end in verdict_issued
// (decode, Gate 1, slots, sources, payload validation, signing, and a durable bbolt commit of the
// decision record), from N concurrent closed-loop clients over loopback HTTP.
//
// It builds verdictd, starts it as a process with a fresh key and an inline-tool policy (no MCP
// round trip: the catalog is static), pre-builds every request, and prints throughput and
// latency percentiles.
//
//	go run ./bench/preflightload -n 20000 -c 32
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
	"github.com/verdictgate/verdict/internal/httpx"
)

const policy = `policy_version: "bench.1"
servers:
  bank:
    audience: ["executor-bank"]
    tools:
      - name: transfer
        description: "Move money between accounts."
        inputSchema:
          type: object
          properties:
            from_account: {type: string, minLength: 1, maxLength: 64}
            to_account: {type: string, minLength: 1, maxLength: 64}
            amount: {type: integer, minimum: 1}
            memo: {type: string, maxLength: 140}
          required: [from_account, to_account, amount]
          additionalProperties: false
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
    when_cases: [immediate]
`

func main() {
	n := flag.Int("n", 20000, "preflights to send")
	c := flag.Int("c", 32, "concurrent clients")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of verdictd during the run to `file` (served on a loopback debug_listen)")
	profsec := flag.Int("profsec", 5, "seconds the -cpuprofile covers, from the start of the load")
	gogc := flag.String("gogc", "", "GOGC `value` for the daemon (default: its environment's, usually 100)")
	tracing := flag.Bool("tracing", false, "run the daemon with tracing on, exporting every span to a local OTLP sink")
	flag.Parse()
	if err := run(*n, *c, *keep, *cpuprofile, *profsec, *gogc, *tracing); err != nil {
		fmt.Fprintln(os.Stderr, "preflightload:", err)
		os.Exit(1)
	}
}

func run(n, clients int, keep bool, cpuprofile string, profsec int, gogc string, tracing bool) error {
	dir, err := os.MkdirTemp("", "preflightload-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("dir:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := loadgen.Build(dir, map[string]string{"verdictd": "./cmd/verdictd"}); err != nil {
		return err
	}
	if out, err := exec.Command(filepath.Join(dir, "verdictd"), "keygen", "--out", filepath.Join(dir, "keys")).CombinedOutput(); err != nil {
		return fmt.Errorf("keygen: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600); err != nil {
		return err
	}
	addr, err := loadgen.FreeAddr()
	if err != nil {
		return err
	}
	conf := map[string]any{
		"listen":      addr,
		"data_dir":    filepath.Join(dir, "data"),
		"issuer":      "verdictd-bench",
		"signing_key": filepath.Join(dir, "keys", "signing.jwk"),
		"policy":      filepath.Join(dir, "policy.yaml"),
		"callers":     []map[string]any{{"name": "load", "token_sha256": httpx.HashToken("load"), "principals": []string{"*"}}},
	}
	var debugAddr string
	if cpuprofile != "" {
		if debugAddr, err = loadgen.FreeAddr(); err != nil {
			return err
		}
		conf["debug_listen"] = debugAddr
	}
	cfg, _ := json.Marshal(conf)
	if err := os.WriteFile(filepath.Join(dir, "verdictd.yaml"), cfg, 0o600); err != nil {
		return err
	}
	base := "http://" + addr
	var env []string
	if gogc != "" {
		env = append(env, "GOGC="+gogc)
	}
	if tracing {
		sink, stop, err := loadgen.TraceSink()
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, sink)
	}
	daemon, err := loadgen.StartDaemon(filepath.Join(dir, "verdictd"), filepath.Join(dir, "verdictd.log"), base, env, "serve", "--config", filepath.Join(dir, "verdictd.yaml"))
	if err != nil {
		return err
	}
	defer daemon.Stop()

	// Every request settles in one run: the action name, amount and recipient are located in the
	// user's own words, the debit account is a stored setting. Conversations differ, so runs are
	// not serialized on one conversation's counters.
	text := "send money: 250,000 won to 110-222-333"
	bodies := make([]string, n)
	for i := range bodies {
		b, _ := json.Marshal(map[string]any{
			"principal":       "u_01",
			"conversation_id": fmt.Sprintf("c_%d", i),
			"server":          "bank",
			"tool":            "transfer",
			"instruction":     []map[string]any{{"text": text, "trust": "user"}},
			"intent":          map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 10}}},
			"candidates": []map[string]any{
				{"field": "amount", "segment": 0, "span": []int{12, 19}, "value": 250000},
				{"field": "to_account", "segment": 0, "span": []int{27, 38}, "value": "110-222-333"},
			},
			"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user", "origin": "settings"}},
		})
		bodies[i] = string(b)
	}
	issued := []byte(`"outcome":"verdict_issued"`)
	var profiled func() error
	if cpuprofile != "" {
		profiled = loadgen.Profile(debugAddr, cpuprofile, profsec)
	}
	cpu0 := daemon.Sample()
	res, err := loadgen.Run(base+"/v1/preflight", "load", bodies, clients, func(status int, body []byte) bool {
		return status == 200 && bytes.Contains(body, issued)
	})
	res.Print(os.Stdout, "preflights ending verdict_issued", clients)
	res.PrintCPU(os.Stdout, daemon.Since(cpu0))
	if profiled != nil {
		if perr := profiled(); perr != nil {
			fmt.Fprintln(os.Stderr, "preflightload: cpu profile:", perr)
		}
	}
	if err != nil {
		return fmt.Errorf("%w (run with -keep and see verdictd.log)", err)
	}
	return nil
}
