package verdictd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
)

// bankCmd is the examples/bank server every test here runs, built once.
var bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")

func TestMain(m *testing.M) {
	code := m.Run()
	bankCmd.Remove()
	opCmd.Remove()
	os.Exit(code)
}

const (
	callerToken = "caller-secret"
	adminToken  = "admin-secret"
	issuerID    = "verdictd-test"
	execID      = "executor-bank"
)

// env is one verdictd under test, on a real bbolt file, with a real bank MCP server as its
// policy's tool server, and optionally a real executor beside it.
type env struct {
	t        testing.TB
	dir      string
	cfg      Config
	svc      *Service
	srv      *httptest.Server
	cancel   context.CancelFunc
	runDone  chan struct{}
	bankArgs []string // the bank command of the policy's tools_from
	exec     *httptest.Server
	execSvc  *executor.Service
	now      func() time.Time
	// policyTicks drives the policy watcher when envOpts.pollPolicy is set (see pollPolicy).
	policyTicks chan time.Time
	fault       func(step string) error // envOpts.fault
	// webhookResult is envOpts.webhookResult.
	webhookResult func(approvalID, result string)
}

type envOpts struct {
	// policy overrides the default bank policy; "%BANK%" is replaced by the bank command as a
	// YAML flow sequence.
	policy string
	// bankURL serves tools over streamable HTTP instead of a stdio child.
	bankURL string
	// executor starts an in-process executor reaching the same bank.
	executor bool
	mutate   func(*Config)
	// now is the service's clock; nil means time.Now.
	now func() time.Time
	// pollPolicy has the policy watcher poll only when the test calls env.pollPolicy, instead
	// of every policy_poll.
	pollPolicy bool
	// fault is the Fault option of the (bbolt) state store: asked before each step of every
	// commit, it fails the commit there with the error it returns.
	fault func(step string) error
	// webhookResult is told each approval webhook request's result once it is counted.
	webhookResult func(approvalID, result string)
}

// bankPolicy is the default policy: transfer and schedule_transfer gated, reads not.
const bankPolicy = `policy_version: "2026-11-30.1"
servers:
  bank:
    audience: [executor-bank]
    tools_from: %BANK%
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money", "transfer money", "pay"]
    fields:
      to_account: {allowed_sources: [user_answer, instruction, pre_set_data, prior_state]}
      from_account: {allowed_sources: [pre_set_data, user_answer]}
    notices: ["Check the recipient."]
  bank/schedule_transfer:
    class: irreversible
    actions: ["schedule a transfer", "send money"]
    pending_at_trigger: []
  bank/get_balance:
    class: read
  bank/list_transactions:
    class: read
`

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, now: o.now, fault: o.fault, webhookResult: o.webhookResult}
	if o.pollPolicy {
		e.policyTicks = make(chan time.Time)
	}
	for _, k := range []string{"signing", "receipt"} {
		if _, err := keys.Keygen(filepath.Join(dir, k), jose.EdDSA); err != nil {
			t.Fatal(err)
		}
	}
	e.bankArgs = []string{bankCmd.Path(t), "--state", filepath.Join(dir, "bank.json")}
	pol := o.policy
	if pol == "" {
		pol = bankPolicy
	}
	e.writePolicy(pol, o.bankURL)
	e.cfg = Config{
		Listen:           "127.0.0.1:0",
		DataDir:          filepath.Join(dir, "data"),
		Issuer:           issuerID,
		SigningKey:       filepath.Join(dir, "signing", keys.PrivateKeyFile),
		Policy:           filepath.Join(dir, "policy.yaml"),
		Callers:          []Caller{{Name: "agent", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{"*"}}},
		AdminTokenSHA256: httpx.HashToken(adminToken),
		Executors:        []Executor{{Issuer: execID, JWKS: filepath.Join(dir, "receipt", keys.JWKSFile)}},
		PolicyPoll:       confx.Duration(50 * time.Millisecond),
	}
	if o.mutate != nil {
		o.mutate(&e.cfg)
	}
	e.start()
	if o.executor {
		e.startExecutor(o.bankURL)
	}
	return e
}

func (e *env) writePolicy(pol, bankURL string) {
	e.t.Helper()
	from := `{command: ["` + strings.Join(e.bankArgs, `", "`) + `"]}`
	if bankURL != "" {
		from = `{url: "` + bankURL + `"}`
	}
	pol = strings.ReplaceAll(pol, "%BANK%", from)
	// Write then rename, as an operator's deploy would: the watcher never sees half a file.
	tmp := filepath.Join(e.dir, "policy.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(pol), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.dir, "policy.yaml")); err != nil {
		e.t.Fatal(err)
	}
}

// start opens the service on cfg and waits until its catalog listed every server.
func (e *env) start() {
	e.t.Helper()
	opts := Options{Now: e.now, webhookResult: e.webhookResult}
	if e.policyTicks != nil {
		opts.PolicyTicks = e.policyTicks
	}
	svc, err := New(context.Background(), e.cfg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.fault != nil {
		// The state store as openState opens it, with the fault hook, before Run uses it.
		st, err := convstate.NewBolt(context.Background(), svc.db, convstate.BoltOptions{ConversationTTL: e.cfg.conversationTTL(),
			MaxConversations: e.cfg.maxConversations(), Now: svc.now, Fault: e.fault})
		if err != nil {
			e.t.Fatal(err)
		}
		svc.state = st
	}
	e.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.runDone = cancel, make(chan struct{})
	go func() { defer close(e.runDone); _ = svc.Run(ctx) }()
	e.srv = httptest.NewServer(svc.Handler())
	e.t.Cleanup(e.stop)
	e.waitReady()
}

// pollPolicy has the policy watcher poll the file n times, and returns once those polls have
// ended: a tick is taken only when the poll before it is over, so the n+1st tick taken closes
// the n-th poll (it starts one more, which the next call's first tick waits for).
func (e *env) pollPolicy(n int) {
	e.t.Helper()
	timeout := time.After(20 * time.Second)
	for range n + 1 {
		select {
		case e.policyTicks <- time.Time{}:
		case <-timeout:
			e.t.Fatal("the policy watcher takes no tick")
		}
	}
}

func (e *env) waitReady() {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, problems := e.svc.Ready()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("verdictd not ready: %v", problems)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the service down the way daemon.Serve does. It is safe to call twice.
func (e *env) stop() {
	if e.svc == nil {
		return
	}
	e.srv.Close()
	e.cancel()
	<-e.runDone
	if err := e.svc.Close(context.Background()); err != nil {
		e.t.Errorf("close: %v", err)
	}
	e.svc = nil
}

// execAdminToken is the admin token of the executor startExecutor runs.
const execAdminToken = "executor-admin-secret"

func (e *env) startExecutor(bankURL string) {
	e.t.Helper()
	server := upstream.Config{Command: e.bankArgs}
	if bankURL != "" {
		server = upstream.Config{URL: bankURL}
	}
	cfg := executor.Config{
		Listen:         "127.0.0.1:0",
		DataDir:        filepath.Join(e.dir, "exec-data"),
		ExecutorID:     execID,
		TrustedIssuers: []executor.TrustedIssuer{{Issuer: issuerID, JWKS: e.srv.URL + "/.well-known/jwks.json"}},
		ReceiptKey:     filepath.Join(e.dir, "receipt", keys.PrivateKeyFile),
		Servers:        map[string]upstream.Config{"bank": server},
		Callers:        []executor.Caller{{Name: "agent", TokenSHA256: httpx.HashToken(callerToken)}},
		// An admin token, so that its execution records can be exported and audited.
		AdminTokenSHA256: httpx.HashToken(execAdminToken),
	}
	ctx := context.Background()
	svc, err := executor.New(ctx, cfg, executor.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.execSvc = svc
	e.exec = httptest.NewServer(svc.Handler())
	e.t.Cleanup(func() {
		e.exec.Close()
		svc.Close(context.Background())
	})
}

// do sends a request with a bearer token ("" for none) and returns status and body.
func do(t testing.TB, method, url, token, contentType string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// record is the part of a decision record the tests read.
type record struct {
	RecordID         string            `json:"record_id"`
	ActionKey        *string           `json:"action_key"`
	Phase            *string           `json:"phase"`
	Principal        string            `json:"principal"`
	Server           string            `json:"server"`
	Tool             string            `json:"tool"`
	ToolSchemaDigest *string           `json:"tool_schema_digest"`
	PolicyVersion    string            `json:"policy_version"`
	Outcome          string            `json:"outcome"`
	UnknownCount     *int              `json:"unknown_count"`
	Questions        []question        `json:"questions"`
	Slots            []json.RawMessage `json:"slots"`
	Gate             struct {
		Kind   string `json:"kind"`
		Detail string `json:"detail"`
	} `json:"gate"`
	CallArguments   json.RawMessage `json:"call_arguments"`
	ArgumentsDigest *string         `json:"arguments_digest"`
	Verdict         *string         `json:"verdict"`
	VerdictID       *string         `json:"verdict_id"`
	AskCeiling      []string        `json:"ask_ceiling_reached"`
	RejectedAnswers []struct {
		QuestionID string `json:"question_id"`
		Reason     string `json:"reason"`
	} `json:"rejected_answers"`
	Deferred *struct {
		RecordID   string `json:"record_id"`
		Occurrence int    `json:"occurrence"`
		Allowed    int    `json:"allowed"`
	} `json:"deferred"`
	raw []byte
}

type question struct {
	QuestionID string          `json:"question_id"`
	SlotID     string          `json:"slot_id"`
	Kind       string          `json:"kind"`
	Value      json.RawMessage `json:"value"`
}

func (r *record) question(slot string) question {
	for _, q := range r.Questions {
		if q.SlotID == slot {
			return q
		}
	}
	return question{}
}

// slot returns the slot with id as a generic map.
func (r *record) slot(id string) map[string]any {
	for _, raw := range r.Slots {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil && m["slot_id"] == id {
			return m
		}
	}
	return nil
}

// preflight posts req (marshalled as JSON) and decodes the 200 record, checking it against the
// contract's record schema.
func (e *env) preflight(req any) *record {
	e.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	status, out := do(e.t, "POST", e.srv.URL+"/v1/preflight", callerToken, "application/json", body)
	if status != http.StatusOK {
		e.t.Fatalf("preflight: %d %s", status, out)
	}
	var r record
	if err := json.Unmarshal(out, &r); err != nil {
		e.t.Fatalf("decode record: %v\n%s", err, out)
	}
	r.raw = out
	validateRecord(e.t, out)
	return &r
}

// recordSchema is the contract's decision-record schema, compiled once.
var recordSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	for _, name := range []string{"preflight-request.schema.json", "decision-record.schema.json"} {
		f, err := os.Open(filepath.Join("..", "schemas", name))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if err := c.AddResource(name, doc); err != nil {
			return nil, err
		}
	}
	return c.Compile("decision-record.schema.json")
})

func validateRecord(t testing.TB, b []byte) {
	t.Helper()
	schema, err := recordSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("record does not match the contract's schema: %v\n%s", err, b)
	}
}

// landlord is the main-path request: an immediate transfer whose recipient is not given.
func landlord(answers ...map[string]any) map[string]any {
	r := map[string]any{
		"principal":       "u_01",
		"conversation_id": "c_77",
		"server":          "bank",
		"tool":            "transfer",
		"instruction":     []map[string]any{{"text": "send money to my landlord, 500,000 won", "trust": "user"}},
		"intent":          map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 10}}},
		"candidates":      []map[string]any{{"field": "amount", "segment": 0, "span": []int{27, 34}, "value": 500000}},
		"pre_set_data":    map[string]any{"from_account": map[string]any{"value": "1102534471", "trust": "user", "origin": "settings"}},
	}
	if len(answers) > 0 {
		r["user_answers"] = answers
	}
	return r
}

// metric returns the value of one series from /metrics ("" labels for none), or -1.
func (e *env) metric(name string) float64 {
	e.t.Helper()
	_, body := do(e.t, "GET", e.srv.URL+"/metrics", "", "", nil)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, name+" "), &v)
			return v
		}
	}
	return -1
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
