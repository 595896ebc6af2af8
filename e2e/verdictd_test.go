package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/verdict"
)

// inlinePolicy gates a transfer whose definition the policy lists itself: no tool server, no
// labels, every value groundable, so one request can end in a verdict.
const inlinePolicy = `policy_version: "e2e.1"
servers:
  pay:
    audience: [executor-bank]
    tools:
      - name: transfer
        description: Move money between accounts.
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
  pay/transfer:
    class: irreversible
    actions: ["send money"]
`

// gateConfig is a verdictd configuration.
type gateConfig struct {
	dir     string
	addr    string
	path    string
	dataDir string
	jwks    string // verdictd's public verdict keys
}

func newGateConfig(t testing.TB, policy string, extra map[string]any) *gateConfig {
	t.Helper()
	dir := t.TempDir()
	if _, err := keys.Keygen(filepath.Join(dir, "keys"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	g := &gateConfig{dir: dir, addr: freeAddr(t), path: filepath.Join(dir, "verdictd.yaml"),
		dataDir: filepath.Join(dir, "data"), jwks: filepath.Join(dir, "keys", "jwks.json")}
	policyPath := filepath.Join(dir, "policy.yaml")
	writeFile(t, policyPath, policy)
	cfg := map[string]any{
		"listen":             g.addr,
		"data_dir":           g.dataDir,
		"issuer":             issuerID,
		"signing_key":        filepath.Join(dir, "keys", keys.PrivateKeyFile),
		"policy":             policyPath,
		"callers":            []map[string]any{{"name": "agent", "token_sha256": httpx.HashToken(callerToken), "principals": []string{"*"}}},
		"admin_token_sha256": httpx.HashToken(adminToken),
	}
	for k, v := range extra {
		cfg[k] = v
	}
	writeJSON(t, g.path, cfg)
	return g
}

func startVerdictd(t testing.TB, g *gateConfig) *daemon {
	t.Helper()
	return startDaemon(t, bins["verdictd"], g.addr, filepath.Join(g.dir, "verdictd.log"), "serve", "--config", g.path)
}

// transferRequest is a preflight whose values are all grounded in the user's text, so it ends
// in verdict_issued, or, with grounded false, one that leaves to_account to be asked.
func transferRequest(conversation string, amount int, grounded bool) []byte {
	text := fmt.Sprintf("send money: %d won to 110-222-333", amount)
	amountAt := strings.Index(text, fmt.Sprint(amount))
	toAt := strings.Index(text, "110-222-333")
	cands := []map[string]any{{"field": "amount", "segment": 0, "span": []int{amountAt, amountAt + len(fmt.Sprint(amount))}, "value": amount}}
	if grounded {
		cands = append(cands, map[string]any{"field": "to_account", "segment": 0, "span": []int{toAt, toAt + 11}, "value": "110-222-333"})
	}
	b, _ := json.Marshal(map[string]any{
		"principal": principal, "conversation_id": conversation, "server": "pay", "tool": "transfer",
		"instruction":  []map[string]any{{"text": text, "trust": "user"}},
		"intent":       map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 10}}},
		"candidates":   cands,
		"pre_set_data": map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user"}},
	})
	return b
}

// decisionReply is what a client keeps of a 200 preflight answer.
type decisionReply struct {
	RecordID  string  `json:"record_id"`
	Outcome   string  `json:"outcome"`
	VerdictID *string `json:"verdict_id"`
	Verdict   *string `json:"verdict"`
}

// TestVerdictdCrash kills verdictd with SIGKILL at random moments while clients post preflights
// (most of them ending in a verdict), restarts it each time, and then checks its file: it opens
// cleanly, every record is whole, every answer a client got is on record, and every verdict a
// record carries verifies against the record's own fields, and only verdict_issued records
// carry one.
func TestVerdictdCrash(t *testing.T) {
	g := newGateConfig(t, inlinePolicy, nil)
	d := startVerdictd(t, g)

	var (
		mu      sync.Mutex
		replies []decisionReply
		other   = map[int]int{}
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	c := newClient(g.addr, callerToken, 30*time.Second)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := transferRequest(fmt.Sprintf("c%d-%d", w, i), 1+rng.IntN(1_000_000), rng.IntN(5) != 0)
				r := c.do(context.Background(), http.MethodPost, "/v1/preflight", body)
				mu.Lock()
				if r.status == http.StatusOK {
					var rep decisionReply
					if err := json.Unmarshal(r.body, &rep); err != nil {
						t.Errorf("200 without a record: %v %.200s", err, r.body)
					}
					replies = append(replies, rep)
				} else {
					other[r.status]++
				}
				mu.Unlock()
				if r.status == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for kill := range crashKills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		d.kill()
		if kill < crashKills-1 {
			d = startVerdictd(t, g)
		}
	}
	close(stop)
	wg.Wait()
	d = startVerdictd(t, g)
	d.stop(t)

	for s, n := range other {
		if s != 0 {
			t.Errorf("%d preflights answered %d", n, s)
		}
	}
	checkDecisionFile(t, g, replies)
}

// checkDecisionFile opens verdictd's file read-only and checks it against the replies clients
// received.
func checkDecisionFile(t *testing.T, g *gateConfig, replies []decisionReply) {
	t.Helper()
	db, err := store.Open(filepath.Join(g.dataDir, "verdictd.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("verdictd's file does not open cleanly: %v", err)
	}
	defer db.Close(context.Background())
	ctx := context.Background()
	if err := db.View(ctx, func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pub, err := keys.LoadJWKS(ctx, g.jwks, keys.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}

	byID := map[string]*store.Decision{}
	verdicts := map[string]string{} // verdict id → record id
	outcomes := map[string]int{}
	err = db.Decisions().Since(ctx, time.Time{}, func(d *store.Decision) error {
		var rec struct {
			RecordID        string  `json:"record_id"`
			Outcome         string  `json:"outcome"`
			ActionKey       *string `json:"action_key"`
			Phase           *string `json:"phase"`
			Server          string  `json:"server"`
			Tool            string  `json:"tool"`
			ToolDigest      *string `json:"tool_schema_digest"`
			ArgumentsDigest *string `json:"arguments_digest"`
			CallArguments   any     `json:"call_arguments"`
			Verdict         *string `json:"verdict"`
			VerdictID       *string `json:"verdict_id"`
			Timestamp       string  `json:"timestamp"`
		}
		if err := json.Unmarshal(d.Record, &rec); err != nil {
			t.Errorf("record %s is not whole JSON: %v", d.RecordID, err)
			return nil
		}
		outcomes[rec.Outcome]++
		if rec.RecordID != d.RecordID || rec.Outcome != d.Outcome {
			t.Errorf("record %s indexed as %s/%s but reads %s/%s", d.RecordID, d.RecordID, d.Outcome, rec.RecordID, rec.Outcome)
		}
		if _, dup := byID[d.RecordID]; dup {
			t.Errorf("record id %s stored twice", d.RecordID)
		}
		byID[d.RecordID] = d
		issued := rec.Outcome == "verdict_issued"
		if issued != (rec.Verdict != nil) || issued != (rec.VerdictID != nil) || issued != (d.VerdictID != "") {
			t.Errorf("record %s: outcome %s with verdict %v, verdict id %v, indexed verdict %q", d.RecordID, rec.Outcome, rec.Verdict != nil, rec.VerdictID, d.VerdictID)
			return nil
		}
		if !issued {
			return nil
		}
		if prev, dup := verdicts[*rec.VerdictID]; dup {
			t.Errorf("verdict id %s carried by records %s and %s", *rec.VerdictID, prev, d.RecordID)
		}
		verdicts[*rec.VerdictID] = d.RecordID
		at, _ := time.Parse(time.RFC3339Nano, rec.Timestamp)
		c, err := verdict.Verify(*rec.Verdict, verdict.Expectation{
			Issuers:         []verdict.TrustedIssuer{{ID: issuerID, Keys: pub}},
			Audience:        executorID,
			Now:             func() time.Time { return at },
			Skew:            5 * time.Second,
			ToolDigest:      func(string, string) (string, bool) { return deref(rec.ToolDigest), true },
			ArgumentsDigest: deref(rec.ArgumentsDigest),
		})
		switch {
		case err != nil:
			t.Errorf("record %s carries a verdict that does not verify against it: %v", d.RecordID, err)
		case c.ID != *rec.VerdictID || c.Record != d.RecordID || c.ActionKey != deref(rec.ActionKey) || c.Phase != deref(rec.Phase) ||
			c.Server != rec.Server || c.Tool != rec.Tool:
			t.Errorf("record %s and its verdict disagree: %+v", d.RecordID, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	issuedReplies := 0
	for _, rep := range replies {
		d, ok := byID[rep.RecordID]
		if !ok {
			t.Errorf("a client was answered with record %s (%s), which is not on record", rep.RecordID, rep.Outcome)
			continue
		}
		if d.Outcome != rep.Outcome {
			t.Errorf("record %s answered as %s, stored as %s", rep.RecordID, rep.Outcome, d.Outcome)
		}
		if rep.VerdictID != nil {
			issuedReplies++
			if verdicts[*rep.VerdictID] != rep.RecordID {
				t.Errorf("verdict %s was handed out with record %s but is on record under %q", *rep.VerdictID, rep.RecordID, verdicts[*rep.VerdictID])
			}
		}
	}
	t.Logf("%d records on file %v, %d verdicts; clients got %d answers, %d with a verdict", len(byID), outcomes, len(verdicts), len(replies), issuedReplies)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
