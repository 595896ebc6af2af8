package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	vclient "github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/keys"
)

// The gateway and the console, built on first use by the tests that run them.
var (
	gatewayCmd = testbin.New("github.com/verdictgate/verdict/cmd/mcpgate")
	consoleCmd = testbin.New("github.com/verdictgate/verdict/cmd/verdict-console")
)

// userToken is the gateway's bearer token of its principal u_01, whose transfers are approved.
const userToken = "e2e-user-u01"

// The provider's users: both approve payments; neither is the gateway's principal.
const (
	approverAlice = "test-user@127.0.0.1" // sub id1
	approverBob   = "test-user2"          // sub id2
)

// replicasPolicy gates the bank's transfer, served over HTTP at %BANK%: its memo is the model's
// draft, which the user reviews in the host, and it runs only once another member of
// payments-approvers approved it in the console.
const replicasPolicy = `policy_version: "e2e-replicas.1"
servers:
  bank:
    audience: [executor-bank]
    tools_from: {url: "%BANK%"}
tools:
  bank/transfer:
    class: irreversible
    actions: ["send money"]
    when_cases: [immediate]
    fields:
      to_account: {allowed_sources: [user_answer, instruction], confirm: true}
      from_account: {allowed_sources: [pre_set_data]}
      amount: {allowed_sources: [user_answer, instruction]}
    drafted: [memo]
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m, use_within: 10m}
  bank/schedule_transfer:
    class: irreversible
    actions: ["schedule a transfer"]
  bank/get_balance:
    class: read
  bank/list_transactions:
    class: read
`

// racers are the approvers of the race who decide through verdictd's API with the provider's
// client-credentials tokens; Alice and Bob decide in the consoles.
const racers = 8

// TestReplicasFull runs a deployment with every shared part on more than one machine: one
// etcd, two verdictd sharing their state and approvals in it, two gateways sharing their
// question rounds and rate limit in it, two consoles sharing their sign-in sessions in it,
// one executor in front of the bank, and the OpenID Provider the approvers sign in at. Gateway
// i and console i talk to verdictd i.
//
//   - A call made through gateway 1 waits for its approval, created by verdictd 1, which Bob
//     approves in console 2. A 2026-07-28 host is not held while it waits: it is told where
//     the call is approved, and makes it again once it is (docs/gateway.md, Approvals in the
//     console). Made again, the call is asked on gateway 1, answered with its requestState on
//     gateway 2, and runs once: the bank sees one transfer, the executor records one
//     execution, the same requestState on gateway 1 runs nothing, and the call made a third
//     time needs an approval of its own.
//   - Ten approvers decide one approval at once, Alice and Bob in the two consoles and eight
//     through the two verdictd: one decision is recorded, and the call acts on it once.
//   - A decision posted through console 2 while etcd is frozen is refused 503: before it
//     reaches verdictd (session_store_unavailable: the console's sessions are in the frozen
//     etcd), and once verdictd has it (store_unavailable). Once etcd is back the approval is
//     decided once and used once.
//   - verdictd 1 is killed while gateway 1's long poll for an approval waits on it: the host
//     is told to make the request again, the approval is decided through verdictd 2 and read
//     there, and the call made again through gateway 2 runs once.
func TestReplicasFull(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs etcd, the OpenID Provider, two each of verdictd, the gateway and the console, the executor and the bank")
	}
	opArgs := []string{"-group", "id1=payments-approvers", "-group", "id2=payments-approvers"}
	for i := range racers {
		id := fmt.Sprint("racer", i)
		opArgs = append(opArgs, "-client", id+":"+id+"-secret", "-group", id+"=payments-approvers")
	}
	s := startFullStack(t, opArgs...)

	t.Run("approved in the other console, run through the other gateway", func(t *testing.T) {
		runs := s.runs(t)
		call := transferCall("c_console", "rent")
		// The user reviews the memo on gateway 1; then the call is whole, verdictd 1 creates
		// its approval, and a 2026-07-28 host is told where it is approved.
		review := callTool(t, s.mrtrHost(t, 0), call)
		if !review.NeedsInput() {
			t.Fatalf("the first round on gateway 1: %s %v", resultText(review), review.Meta)
		}
		a := s.approvalOf(t, 0, callTool(t, s.mrtrHost(t, 0), reviewed(call, review.RequestState)), "c_console")
		s.recordOn(t, a.RecordID, 0)
		if replay := callTool(t, s.mrtrHost(t, 1), reviewed(call, review.RequestState)); !replay.IsError ||
			resultReason(replay) != api.ReasonStateReplayed {
			t.Fatalf("the answered round again on gateway 2: %s %v", resultText(replay), replay.Meta)
		}

		bob := signIn(t, s.op, s.consoles[1], approverBob)
		if got := bob.pending(t); len(got) != 1 || got[0] != a.ApprovalID {
			t.Fatalf("console 2 lists %v pending, want %s", got, a.ApprovalID)
		}
		p := bob.decide(t, a.ApprovalID, bob.form(t, a.ApprovalID, api.DecisionApprove))
		if p.status != http.StatusSeeOther || p.location != "/approvals/"+a.ApprovalID+"?decided=approve" {
			t.Fatalf("approving in console 2: %d %q\n%s", p.status, p.location, p.body)
		}
		if p := bob.do(t, http.MethodGet, p.location, nil); !strings.Contains(p.body, "You approved this call.") {
			t.Fatalf("the approval page after the decision: %d\n%s", p.status, p.body)
		}

		// The same call made again: asked on gateway 1, answered on gateway 2, which runs it.
		review = callTool(t, s.mrtrHost(t, 0), call)
		if !review.NeedsInput() {
			t.Fatalf("the call made again, on gateway 1: %s %v", resultText(review), review.Meta)
		}
		done := callTool(t, s.mrtrHost(t, 1), reviewed(call, review.RequestState))
		if done.IsError || done.NeedsInput() {
			t.Fatalf("the round answered on gateway 2: %s %v", resultText(done), done.Meta)
		}
		s.ranOnce(t, runs, done, 1)
		if replay := callTool(t, s.mrtrHost(t, 0), reviewed(call, review.RequestState)); !replay.IsError ||
			resultReason(replay) != api.ReasonStateReplayed {
			t.Fatalf("the same round again on gateway 1: %s %v", resultText(replay), replay.Meta)
		}
		used := s.approval(t, 0, a.ApprovalID)
		if used.State != api.ApprovalApproved || used.DecidedBy != s.op.Issuer+"#id2" || used.UsedBy == "" {
			t.Fatalf("the approval after its use, on verdictd 1: %+v", used)
		}
		s.recordOn(t, used.UsedBy, 1) // the verdict was issued by verdictd 2
		// Used once: the call made a third time needs an approval of its own.
		s.again(t, 0, call, a.ApprovalID)
		s.ranOnce(t, runs, done, 1)
	})

	t.Run("ten approvers race across the consoles and the replicas", func(t *testing.T) {
		runs := s.runs(t)
		call := transferCall("c_race", "")
		a := s.approvalOf(t, 1, callTool(t, s.mrtrHost(t, 1), call), "c_race")
		// Each decides as the others: approve or deny, alternately. The consoles' pages are
		// read first, as their approvers' browsers would have them open.
		decisions := func(i int) string { return []string{api.DecisionApprove, api.DecisionDeny}[i%2] }
		consoles := []*consoleSession{signIn(t, s.op, s.consoles[0], approverAlice), signIn(t, s.op, s.consoles[1], approverBob)}
		forms := make([]url.Values, len(consoles))
		for i, c := range consoles {
			forms[i] = c.form(t, a.ApprovalID, decisions(i))
		}
		apis := make([]*client, racers)
		for i := range apis {
			id := fmt.Sprint("racer", i)
			apis[i] = newClient(s.verdictd[i%2].addr, s.op.ClientCredentials(t, id, id+"-secret"), 30*time.Second)
		}
		type outcome struct {
			who    string
			status int
			code   string
			won    string // the decision recorded, when this one was
		}
		start := make(chan struct{})
		outcomes := make(chan outcome, len(consoles)+racers)
		for i, c := range consoles {
			go func() {
				<-start
				p := c.decide(t, a.ApprovalID, forms[i])
				o := outcome{who: fmt.Sprint("console ", i+1), status: p.status, code: p.problemCode()}
				if p.status == http.StatusSeeOther {
					o.won = decisions(i)
				}
				outcomes <- o
			}()
		}
		for i, c := range apis {
			go func() {
				<-start
				r := c.do(t.Context(), http.MethodPost, "/v1/approvals/"+a.ApprovalID,
					fmt.Appendf(nil, `{"decision":%q,"arguments_digest":%q}`, decisions(i), a.ArgumentsDigest))
				o := outcome{who: fmt.Sprintf("racer %d on verdictd %d", i, i%2+1), status: r.status, code: r.errorCode()}
				if r.status == http.StatusOK {
					o.won = decisions(i)
				}
				outcomes <- o
			}()
		}
		close(start)
		var won []string
		for range len(consoles) + racers {
			switch o := <-outcomes; {
			case o.won != "":
				won = append(won, o.who+": "+o.won)
			case o.status != http.StatusConflict || o.code != api.CodeAlreadyDecided:
				t.Errorf("%s: %d %q, want a decision or 409 already_decided", o.who, o.status, o.code)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d decisions recorded, want 1: %v", len(won), won)
		}
		want := api.ApprovalApproved
		if strings.HasSuffix(won[0], api.DecisionDeny) {
			want = api.ApprovalDenied
		}
		for i := range 2 {
			if got := s.approval(t, i, a.ApprovalID); got.State != want {
				t.Fatalf("verdictd %d reads the approval %s, want %s (%s won)", i+1, got.State, want, won[0])
			}
		}
		// The call made again, through the other gateway, acts on the one decision.
		done := callTool(t, s.mrtrHost(t, 0), call)
		if want == api.ApprovalApproved {
			if done.IsError || done.NeedsInput() {
				t.Fatalf("the approved call on gateway 1: %s %v", resultText(done), done.Meta)
			}
			s.ranOnce(t, runs, done, 1)
		} else {
			if !done.IsError || resultReason(done) != api.CodeApprovalDenied {
				t.Fatalf("the denied call on gateway 1: %s %v", resultText(done), done.Meta)
			}
			s.ranOnce(t, runs, nil, 0)
		}
		if used := s.approval(t, 1, a.ApprovalID); used.UsedBy == "" {
			t.Fatalf("the approval after the call acted on it: %+v", used)
		}
		t.Logf("won the race: %s", won[0])
	})

	t.Run("etcd frozen during a decision in a console", func(t *testing.T) {
		runs := s.runs(t)
		call := transferCall("c_frozen", "")
		a := s.approvalOf(t, 0, callTool(t, s.mrtrHost(t, 0), call), "c_frozen")
		bob := signIn(t, s.op, s.consoles[1], approverBob)
		form := bob.form(t, a.ApprovalID, api.DecisionApprove)

		// Frozen before the post: console 2 cannot read the session, and sends nothing on.
		s.etcd.Freeze()
		p := bob.decide(t, a.ApprovalID, form)
		s.etcd.Thaw()
		s.waitReady(t)
		if p.status != http.StatusServiceUnavailable || p.problemCode() != "session_store_unavailable" {
			t.Fatalf("a decision in console 2 with etcd frozen: %d %q\n%s", p.status, p.problemCode(), p.body)
		}
		if n := s.hold.decisions(a.ApprovalID); n != 0 {
			t.Fatalf("verdictd 2 was sent %d decisions while console 2 could not read the session", n)
		}

		// Frozen as the post reaches verdictd 2: the console has read the session, verdictd
		// cannot read or write the approval, and the page says so.
		arrived, release := s.hold.arm(a.ApprovalID)
		pc := make(chan page, 1)
		go func() { pc <- bob.decide(t, a.ApprovalID, form) }()
		select {
		case <-arrived:
		case p := <-pc:
			t.Fatalf("the decision in console 2 was answered before it reached verdictd 2: %d %q", p.status, p.problemCode())
		}
		s.etcd.Freeze()
		close(release)
		p = <-pc
		s.etcd.Thaw()
		s.waitReady(t)
		if p.status != http.StatusServiceUnavailable || p.problemCode() != api.CodeStoreUnavailable {
			t.Fatalf("a decision reaching verdictd 2 with etcd frozen: %d %q\n%s", p.status, p.problemCode(), p.body)
		}

		// Once etcd is back: decided once, by whichever decision etcd took first.
		alice := signIn(t, s.op, s.consoles[0], approverAlice)
		switch p := alice.decide(t, a.ApprovalID, alice.form(t, a.ApprovalID, api.DecisionApprove)); {
		case p.status == http.StatusSeeOther:
		case p.status == http.StatusConflict && p.problemCode() == api.CodeAlreadyDecided:
		default:
			t.Fatalf("the decision in console 1 once etcd is back: %d %q\n%s", p.status, p.problemCode(), p.body)
		}
		decided := s.approval(t, 1, a.ApprovalID)
		if decided.State != api.ApprovalApproved || decided.UsedBy != "" {
			t.Fatalf("the approval once etcd is back, on verdictd 2: %+v", decided)
		}
		// Used once: the call made again through gateway 2 runs; made a third time, through
		// gateway 1, it needs an approval of its own.
		done := callTool(t, s.mrtrHost(t, 1), call)
		if done.IsError || done.NeedsInput() {
			t.Fatalf("the approved call on gateway 2: %s %v", resultText(done), done.Meta)
		}
		s.again(t, 0, call, a.ApprovalID)
		s.ranOnce(t, runs, done, 1)
		if used := s.approval(t, 0, a.ApprovalID); used.UsedBy == "" || used.DecidedBy != decided.DecidedBy {
			t.Fatalf("the approval after its use, on verdictd 1: %+v (decided by %s before)", used, decided.DecidedBy)
		}
	})

	t.Run("a replica killed during a long poll", func(t *testing.T) {
		runs := s.runs(t)
		// A 2025-11-25 host is sent to the approval's page in place, and its call waits on
		// gateway 1's long poll of verdictd 1.
		urls := make(chan *mcp.ElicitParams, 4)
		opts := &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if req.Params.Mode != "url" {
					return &mcp.ElicitResult{Action: "decline"}, nil
				}
				urls <- req.Params
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
				Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		}
		call := transferCall("c_kill", "")
		waiting := make(chan *mcp.CallToolResult, 1)
		h1 := host(t, s.gateways[0], "2025-11-25", opts)
		go func() {
			res, err := h1.CallTool(t.Context(), call)
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			waiting <- res
		}()
		var id string
		select {
		case p := <-urls:
			if id = p.ElicitationID; p.URL != s.consoles[0]+"/approvals/"+id {
				t.Fatalf("sent to %s for approval %s, want console 1's page", p.URL, id)
			}
		case res := <-waiting:
			t.Fatalf("the call on gateway 1 ended before it waited: %s %v", resultText(res), res.Meta)
		}
		waitFor(t, "gateway 1's long poll waiting on verdictd 1", func() bool { return s.longPolls(t, 0) == 1 })
		s.vd[0].kill()
		res := <-waiting
		if !res.IsError || resultReason(res) != api.ReasonApprovalPendingElsewhere || !strings.Contains(resultText(res), id) {
			t.Fatalf("the waiting call once verdictd 1 is gone: %s %v", resultText(res), res.Meta)
		}
		s.ranOnce(t, runs, nil, 0)

		bob := signIn(t, s.op, s.consoles[1], approverBob)
		if p := bob.decide(t, id, bob.form(t, id, api.DecisionApprove)); p.status != http.StatusSeeOther {
			t.Fatalf("approving in console 2: %d %q\n%s", p.status, p.problemCode(), p.body)
		}
		if a := s.approval(t, 1, id); a.State != api.ApprovalApproved || a.UsedBy != "" {
			t.Fatalf("the approval on verdictd 2: %+v", a)
		}
		done := callTool(t, host(t, s.gateways[1], "2025-11-25", opts), call)
		if done.IsError {
			t.Fatalf("the call made again on gateway 2: %s %v", resultText(done), done.Meta)
		}
		select {
		case again := <-urls:
			t.Fatalf("the call made again was sent to approval %s", again.ElicitationID)
		default:
		}
		s.ranOnce(t, runs, done, 1)
		if a := s.approval(t, 1, id); a.UsedBy == "" {
			t.Fatalf("the approval after its use, on verdictd 2: %+v", a)
		}
	})
}

// fullStack is the deployment of TestReplicasFull, its processes stopped when the test ends.
type fullStack struct {
	etcd     *etcdtest.Server
	op       *testop.OP
	bankLog  string
	exec     *execConfig
	verdictd [2]*gateConfig
	vd       [2]*daemon
	debug    [2]string      // verdictd's debug_listen addresses
	gateways [2]string      // base URLs
	consoles [2]string      // base URLs, their public URLs too
	hold     *holdDecisions // between console 2 and verdictd 2
	logs     []string       // the daemons' logs, shown when the test fails
}

func startFullStack(t *testing.T, opArgs ...string) *fullStack {
	t.Helper()
	s := &fullStack{etcd: etcdtest.NewServer(t)}
	// Registered first, run last: the daemons have stopped, their logs are whole.
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range s.logs {
				t.Logf("%s:\n%s", l, tail(l))
			}
		}
	})
	s.op = testop.Start(t, opCmd.Path(t), append([]string{"-resource", approvalsResource}, opArgs...)...)
	dir := t.TempDir()
	s.bankLog = filepath.Join(dir, "bank-calls.jsonl")
	bankURL := startHTTPBank(t, filepath.Join(dir, "bank.json"), s.bankLog)
	policy := strings.Replace(replicasPolicy, "%BANK%", bankURL, 1)
	// Every part keeps its shared state under one prefix of the one etcd, as docs/operations.md
	// has a deployment do. A request etcd does not answer within 2s is refused.
	etcd := func() map[string]any {
		return map[string]any{"kind": "etcd", "endpoints": []string{s.etcd.Endpoint}, "prefix": "/e2e-full/", "request_timeout": "2s"}
	}

	for i := range 2 {
		s.debug[i] = freeAddr(t)
		extra := map[string]any{"state_store": etcd(), "debug_listen": s.debug[i], "approvers": map[string]any{
			"issuers": []map[string]any{{"issuer": s.op.Issuer, "audience": approvalsResource}},
		}}
		if i > 0 {
			extra["signing_key"] = filepath.Join(s.verdictd[0].dir, "keys", keys.PrivateKeyFile)
		}
		s.verdictd[i] = newGateConfig(t, policy, extra)
		s.vd[i] = startVerdictd(t, s.verdictd[i])
		s.logs = append(s.logs, filepath.Join(s.verdictd[i].dir, "verdictd.log"))
	}
	s.exec = newExecConfig(t)
	s.exec.extra = map[string]any{
		"trusted_issuers": []map[string]string{{"issuer": issuerID, "jwks": s.verdictd[0].jwks}},
		"servers":         map[string]any{"bank": map[string]any{"url": bankURL}},
	}
	s.exec.write(t)
	startExecutor(t, s.exec)
	s.logs = append(s.logs, filepath.Join(s.exec.dir, "executor.log"))
	s.hold = newHoldDecisions(t, "http://"+s.verdictd[1].addr)

	stateKey := filepath.Join(dir, "state.key") // the same on both gateways
	writeFile(t, stateKey, "0123456789abcdef0123456789abcdef-e2e-replicas")
	readToken := filepath.Join(dir, "read.token")
	writeFile(t, readToken, adminToken)
	// The principal's first rounds, ten in all, fit in the burst of the rate limit the
	// gateways share, whatever time the test takes.
	gatewayState := etcd()
	gatewayState["call_burst"] = 32
	for i := range 2 {
		gateway, console := freeAddr(t), freeAddr(t)
		s.gateways[i], s.consoles[i] = "http://"+gateway, "http://"+console
		gdir := t.TempDir()
		writeJSON(t, filepath.Join(gdir, "mcpgate.yaml"), map[string]any{
			"listen":         gateway,
			"policy":         filepath.Join(s.verdictd[i].dir, "policy.yaml"),
			"verdictd":       map[string]string{"url": "http://" + s.verdictd[i].addr, "token": callerToken},
			"executor":       map[string]string{"url": "http://" + s.exec.addr, "token": callerToken},
			"state_key_file": stateKey,
			"state":          gatewayState,
			"principals": map[string]any{"u_01": map[string]any{"token_sha256": httpx.HashToken(userToken),
				"pre_set_data": map[string]any{"from_account": "1102534471"}}},
			"tools":       map[string]any{"bank/transfer": map[string]any{"action_name_preset": "send money", "when_case": "immediate"}},
			"console_url": s.consoles[i],
		})
		startDaemon(t, gatewayCmd.Path(t), gateway, filepath.Join(gdir, "mcpgate.log"), "serve", "--config", filepath.Join(gdir, "mcpgate.yaml"))
		s.logs = append(s.logs, filepath.Join(gdir, "mcpgate.log"))

		verdictd := "http://" + s.verdictd[i].addr
		if i == 1 {
			verdictd = s.hold.url
		}
		cdir := t.TempDir()
		writeJSON(t, filepath.Join(cdir, "console.yaml"), map[string]any{
			"listen":     console,
			"public_url": s.consoles[i],
			"oidc":       map[string]any{"issuer": s.op.Issuer, "client_id": testop.NativeClientID, "resource": approvalsResource},
			"verdictd":   map[string]string{"url": verdictd, "read_token_file": readToken},
			"executor":   map[string]string{"url": "http://" + s.exec.addr, "read_token_file": readToken},
			"session":    map[string]any{"store": etcd()},
		})
		startDaemon(t, consoleCmd.Path(t), console, filepath.Join(cdir, "console.log"), "serve", "--config", filepath.Join(cdir, "console.yaml"))
		s.logs = append(s.logs, filepath.Join(cdir, "console.log"))
	}
	return s
}

// startHTTPBank runs the example bank over streamable HTTP with its state and call log until
// the test ends, and returns its URL once it listens.
func startHTTPBank(t *testing.T, state, log string) string {
	t.Helper()
	cmd := exec.Command(bins["bank"], "--http", "127.0.0.1:0", "--state", state, "--log", log)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go io.Copy(io.Discard, stderr)
			return strings.TrimSpace(u)
		}
	}
	t.Fatal("the bank exited before it listened")
	return ""
}

// transferCall is the model's transfer in conversation conv, with memo as its drafted memo (none
// when empty). The host grounds the amount and the account in what the user typed, so nothing
// but the memo is asked of the user: once it is reviewed (at once, without one) the call is
// whole, and its approval is asked of the console.
func transferCall(conv, memo string) *mcp.CallToolParams {
	args := map[string]any{"from_account": "1102534471", "to_account": "110-222-333", "amount": 1200}
	if memo != "" {
		args["memo"] = memo
	}
	const text = "send money: 1200 won to 110-222-333"
	span := func(s string) map[string]any {
		i := strings.Index(text, s)
		return map[string]any{"segment": 0, "span": []int{i, i + len(s)}}
	}
	return &mcp.CallToolParams{Name: "bank.transfer", Arguments: args, Meta: mcp.Meta{
		api.MetaConversationID: conv,
		api.MetaInstruction:    []any{map[string]any{"text": text, "trust": "user"}},
		api.MetaLocations:      map[string]any{"amount": span("1200"), "to_account": span("110-222-333")},
	}}
}

// reviewed is call continued with state, the user having approved the drafted memo.
func reviewed(call *mcp.CallToolParams, state string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: call.Name, Arguments: call.Arguments, RequestState: state,
		InputResponses: mcp.InputResponseMap{"answers": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"memo": "approve"}}}}
}

// mrtrHost is a 2026-07-28 host of the user's at gateway i that handles input_required itself.
func (s *fullStack) mrtrHost(t *testing.T, i int) *mcp.ClientSession {
	t.Helper()
	return host(t, s.gateways[i], "", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
}

// host connects to the gateway at base as the user's MCP host of revision (the SDK's newest
// when empty).
func host(t *testing.T, base, revision string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-host", Version: "1"}, opts)
	sess, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{userToken}}}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// callTool makes one tools/call of host h.
func callTool(t *testing.T, h *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := h.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

func resultReason(res *mcp.CallToolResult) string {
	r, _ := res.Meta[api.MetaReason].(string)
	return r
}

// approvalPage finds the console's page of an approval in a gateway's answer.
var approvalPage = regexp.MustCompile(`/approvals/(apr_[A-Za-z0-9_-]+)`)

// approvalOf checks that res tells the host its call waits for an approval in the console,
// and returns that approval as verdictd i reads it to the gateway's caller token: pending, of
// conversation conv.
func (s *fullStack) approvalOf(t *testing.T, i int, res *mcp.CallToolResult, conv string) api.Approval {
	t.Helper()
	m := approvalPage.FindStringSubmatch(resultText(res))
	if !res.IsError || resultReason(res) != api.ReasonApprovalPendingElsewhere || m == nil {
		t.Fatalf("the call, waiting for its approval: %s %v", resultText(res), res.Meta)
	}
	a := s.approval(t, i, m[1])
	if a.State != api.ApprovalPending || a.ConversationID != conv {
		t.Fatalf("the call's approval on verdictd %d: %+v, want pending, of %s", i+1, a, conv)
	}
	return a
}

// again makes call once more, through gateway i, after it ran on approval used: a 2026-07-28
// host's rounds, the drafted memo reviewed, end waiting for an approval other than used.
func (s *fullStack) again(t *testing.T, i int, call *mcp.CallToolParams, used string) {
	t.Helper()
	h := s.mrtrHost(t, i)
	res := callTool(t, h, call)
	if res.NeedsInput() {
		res = callTool(t, h, reviewed(call, res.RequestState))
	}
	conv, _ := call.Meta[api.MetaConversationID].(string)
	if a := s.approvalOf(t, i, res, conv); a.ApprovalID == used {
		t.Fatalf("the call made again reused approval %s", used)
	}
}

// waitReady waits until both consoles and both gateways are ready again, as after etcd was
// frozen: each answers /readyz 200 once its etcd requests (and, for a console, its
// verdictd's) are answered again.
func (s *fullStack) waitReady(t *testing.T) {
	t.Helper()
	for _, base := range append(s.consoles[:], s.gateways[:]...) {
		c := newClient(strings.TrimPrefix(base, "http://"), "", 10*time.Second)
		waitFor(t, base+" ready", func() bool { return c.do(t.Context(), http.MethodGet, "/readyz", nil).status == http.StatusOK })
	}
}

// approval reads approval id on verdictd i with the gateway's caller token.
func (s *fullStack) approval(t *testing.T, i int, id string) api.Approval {
	t.Helper()
	r := newClient(s.verdictd[i].addr, callerToken, 30*time.Second).do(t.Context(), http.MethodGet, "/v1/approvals/"+id, nil)
	var a api.Approval
	if r.status != http.StatusOK || json.Unmarshal(r.body, &a) != nil {
		t.Fatalf("approval %s on verdictd %d: %d %s", id, i+1, r.status, r.body)
	}
	return a
}

// recordOn checks that verdictd i, and not the other, holds decision record id: each replica
// keeps the records of its own preflights in its own file.
func (s *fullStack) recordOn(t *testing.T, id string, i int) {
	t.Helper()
	for j := range 2 {
		want := http.StatusNotFound
		if j == i {
			want = http.StatusOK
		}
		if r := newClient(s.verdictd[j].addr, adminToken, 30*time.Second).do(t.Context(), http.MethodGet, "/v1/records/"+id, nil); r.status != want {
			t.Fatalf("record %s on verdictd %d: %d, want %d", id, j+1, r.status, want)
		}
	}
}

// runs counts what ran so far: the bank's transfers and the executor's executions.
type runs struct{ transfers, executions int }

func (s *fullStack) runs(t *testing.T) runs {
	t.Helper()
	var r runs
	for _, l := range readCallLog(t, s.bankLog) {
		if l.Tool == "transfer" {
			r.transfers++
		}
	}
	r.executions = len(s.executions(t))
	return r
}

// executions are the executor's execution records.
func (s *fullStack) executions(t *testing.T) []api.ExecutionRecord {
	t.Helper()
	c, err := vclient.New("http://"+s.exec.addr, vclient.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	var out []api.ExecutionRecord
	if _, err := c.Executions(t.Context(), vclient.Query{}, func(b json.RawMessage) error {
		var x api.ExecutionRecord
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// ranOnce checks that n calls ran since before: n more transfers at the bank and n more
// executions, done's (if not nil) executed, and recorded once.
func (s *fullStack) ranOnce(t *testing.T, before runs, done *mcp.CallToolResult, n int) {
	t.Helper()
	now := s.runs(t)
	if now.transfers != before.transfers+n || now.executions != before.executions+n {
		t.Fatalf("%d transfers and %d executions since, want %d of each", now.transfers-before.transfers, now.executions-before.executions, n)
	}
	if done == nil {
		return
	}
	id, _ := done.Meta[api.MetaExecutionRecord].(string)
	found := 0
	for _, x := range s.executions(t) {
		if x.RecordID == id && x.Decision == api.ExecutionExecuted && x.Tool == "transfer" {
			found++
		}
	}
	if id == "" || found != 1 {
		t.Fatalf("execution record %q of the call found %d times, want once", id, found)
	}
}

// longPolls counts the long polls waiting in verdictd i: the goroutines whose innermost frame
// outside the runtime is the approvals API's wait, as its debug_listen shows them.
func (s *fullStack) longPolls(t *testing.T, i int) int {
	t.Helper()
	r := newClient(s.debug[i], "", 10*time.Second).do(t.Context(), http.MethodGet, "/debug/pprof/goroutine?debug=2", nil)
	if r.status != http.StatusOK {
		t.Fatalf("verdictd %d's goroutines: %d %v", i+1, r.status, r.err)
	}
	n := 0
	for _, g := range strings.Split(string(r.body), "\n\n") {
		for _, line := range strings.Split(g, "\n")[1:] {
			if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
				continue
			}
			if strings.HasPrefix(line, "github.com/verdictgate/verdict/approvals.(*Service).HandleGet(") {
				n++
			}
			break
		}
	}
	return n
}

// holdDecisions stands between a console and its verdictd, forwarding every request; armed
// with an approval id, it holds that approval's next decision until the test lets it go on.
type holdDecisions struct {
	url   string
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	posts   map[string]int // decisions forwarded, by approval id
	armed   string
	arrived chan struct{}
	release chan struct{}
}

func newHoldDecisions(t *testing.T, target string) *holdDecisions {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdDecisions{proxy: httputil.NewSingleHostReverseProxy(u), posts: map[string]int{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *holdDecisions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/approvals/"); ok && r.Method == http.MethodPost {
		h.mu.Lock()
		h.posts[id]++
		var arrived, release chan struct{}
		if h.armed == id {
			arrived, release, h.armed = h.arrived, h.release, ""
		}
		h.mu.Unlock()
		if arrived != nil {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
	}
	h.proxy.ServeHTTP(w, r)
}

// arm holds the next decision of approval id: arrived is closed when it comes, and it goes on
// to verdictd once release is closed.
func (h *holdDecisions) arm(id string) (arrived <-chan struct{}, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.arrived, h.release = id, make(chan struct{}), make(chan struct{})
	return h.arrived, h.release
}

// decisions is the number of decisions of approval id forwarded to verdictd.
func (h *holdDecisions) decisions(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.posts[id]
}

// consoleSession is an approver signed in at a console: the session cookie a browser keeps.
type consoleSession struct {
	base   string
	cookie *http.Cookie
	client *http.Client
}

// signIn signs username in at the console at base as a browser does: the console sends it to
// the provider, whose login form it fills in, and back to the console's callback, which sets
// the session cookie; the browser ends on the console's list of pending approvals.
func signIn(t *testing.T, op *testop.OP, base, username string) *consoleSession {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var cookie *http.Cookie
	b := op.Browser(username).Watch(func(p testop.Page) {
		if p.URL.Host != u.Host || p.URL.Path != "/callback" {
			return
		}
		for _, line := range p.Header.Values("Set-Cookie") {
			if c, err := http.ParseSetCookie(line); err == nil && c.Name == "verdict-console-session" && c.Value != "" {
				cookie = c
			}
		}
	})
	p, err := b.Visit(t.Context(), base+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != http.StatusOK || p.URL.Host != u.Host || p.URL.Path != "/" || cookie == nil {
		t.Fatalf("signing %s in at %s ended at %s (%d), cookie %v:\n%s", username, base, p.URL, p.Status, cookie, p.Body)
	}
	return &consoleSession{base: base, cookie: cookie, client: &http.Client{
		Timeout:       90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is a console's answer.
type page struct {
	status   int
	location string
	body     string
}

var (
	problemCode  = regexp.MustCompile(`id="problem-code">([^<]*)<`)
	hiddenInput  = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
	approvalLink = regexp.MustCompile(`href="/approvals/([A-Za-z0-9_-]+)"`)
)

// problemCode is the refusal code the page shows, or "".
func (p page) problemCode() string {
	if m := problemCode.FindStringSubmatch(p.body); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

// do sends a request of the approver's browser: a form is posted from the console's own page.
func (c *consoleSession) do(t *testing.T, method, path string, form url.Values) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: c.cookie.Name, Value: c.cookie.Value})
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.base)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Errorf("%s %s%s: %v", method, c.base, path, err)
		return page{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s%s: %v", method, c.base, path, err)
	}
	return page{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(b)}
}

// pending lists the approvals the console's pending page links to.
func (c *consoleSession) pending(t *testing.T) []string {
	t.Helper()
	p := c.do(t, http.MethodGet, "/", nil)
	if p.status != http.StatusOK {
		t.Fatalf("the pending list at %s: %d %s", c.base, p.status, p.body)
	}
	var ids []string
	for _, m := range approvalLink.FindAllStringSubmatch(p.body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// form opens the approval's page and fills in its form with decision, as the approver's click
// does: the page's form token and the arguments digest it shows.
func (c *consoleSession) form(t *testing.T, id, decision string) url.Values {
	t.Helper()
	p := c.do(t, http.MethodGet, "/approvals/"+id, nil)
	if p.status != http.StatusOK {
		t.Fatalf("the approval page of %s at %s: %d %s", id, c.base, p.status, p.body)
	}
	form := url.Values{"decision": {decision}}
	for _, m := range hiddenInput.FindAllStringSubmatch(p.body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("csrf_token") == "" || form.Get("arguments_digest") == "" {
		t.Fatalf("the approval page of %s at %s has no form to decide:\n%s", id, c.base, p.body)
	}
	return form
}

// decide posts the filled-in form of approval id.
func (c *consoleSession) decide(t *testing.T, id string, form url.Values) page {
	t.Helper()
	return c.do(t, http.MethodPost, "/approvals/"+id, form)
}
