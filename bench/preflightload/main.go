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
	l := loadgen.NewDaemonLoad("preflightload", "verdictd", "verdictd", "preflights to send")
	flag.Parse()
	l.Main(map[string]string{"verdictd": "./cmd/verdictd"}, func() error { return run(l) })
}

func run(l *loadgen.DaemonLoad) error {
	if out, err := exec.Command(l.Path("verdictd"), "keygen", "--out", l.Path("keys")).CombinedOutput(); err != nil {
		return fmt.Errorf("keygen: %v: %s", err, out)
	}
	if err := os.WriteFile(l.Path("policy.yaml"), []byte(policy), 0o600); err != nil {
		return err
	}
	addr, err := loadgen.FreeAddr()
	if err != nil {
		return err
	}
	if _, err := l.Start(map[string]any{
		"listen":      addr,
		"data_dir":    l.Path("data"),
		"issuer":      "verdictd-bench",
		"signing_key": l.Path("keys", "signing.jwk"),
		"policy":      l.Path("policy.yaml"),
		"callers":     []map[string]any{{"name": "load", "token_sha256": httpx.HashToken("load"), "principals": []string{"*"}}},
	}); err != nil {
		return err
	}

	// Every request settles in one run: the action name, amount and recipient are located in the
	// user's own words, the debit account is a stored setting. Conversations differ, so runs are
	// not serialized on one conversation's counters.
	text := "send money: 250,000 won to 110-222-333"
	bodies := make([]string, l.N)
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
	return l.Load("/v1/preflight", "preflights ending verdict_issued", bodies, func(status int, body []byte) bool {
		return status == 200 && bytes.Contains(body, issued)
	})
}
