package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/apitest"
	"github.com/verdictgate/verdict/internal/testing/testtool"
	"github.com/verdictgate/verdict/upstream"
)

// user is the person at the keyboard of the test host: they type the
// values they mean and approve what they are shown, or turn the form
// down.
type user struct {
	values map[string]any // by form property
	action string         // "" accepts

	mu    sync.Mutex
	forms []*mcp.ElicitParams
}

func (u *user) answer(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	u.forms = append(u.forms, req.Params)
	u.mu.Unlock()
	if u.action != "" {
		return &mcp.ElicitResult{Action: u.action}, nil
	}
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	b, _ := json.Marshal(req.Params.RequestedSchema)
	if err := json.Unmarshal(b, &schema); err != nil {
		return nil, err
	}
	content := map[string]any{}
	for key, prop := range schema.Properties {
		if prop["type"] == "boolean" {
			content[key] = true
		} else if v, ok := u.values[key]; ok {
			content[key] = v
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

func (u *user) shown() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, f := range u.forms {
		b, _ := json.Marshal(f)
		out = append(out, string(b))
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

func reason(res *mcp.CallToolResult) string {
	r, _ := res.Meta["io.verdict/reason"].(string)
	return r
}

// modelArgs is what the model proposes: an account number it made up and
// an amount it guessed.
func modelArgs() map[string]any {
	return map[string]any{"from_account": "1102534471", "to_account": "999-888-777", "amount": 500000}
}

// TestToolsAreReexposedUnchanged: at the aggregated endpoint every tool is
// "<server>.<tool>", at the server's own endpoint (/mcp/<server>) it keeps
// the server's name; at both the definition is the server's.
func TestToolsAreReexposedUnchanged(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	ctx := ctxT(t)
	direct, err := upstream.Dial(ctx, "bank", upstream.Config{URL: s.bankURL}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want, err := direct.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []struct{ path, prefix string }{{"/mcp", "bank."}, {"/mcp/bank", ""}} {
		t.Run(at.path, func(t *testing.T) {
			viaGate, err := upstream.Dial(ctx, "gate", upstream.Config{URL: g.url + at.path,
				Headers: map[string]string{"Authorization": "Bearer " + userToken}}, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer viaGate.Close()
			got, err := viaGate.Tools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]upstream.Tool{}
			for _, tl := range got {
				byName[tl.Name] = tl
			}
			if len(got) != len(want) {
				t.Errorf("gateway lists %d tools, the bank %d", len(got), len(want))
			}
			for _, w := range want {
				g, ok := byName[at.prefix+w.Name]
				if !ok {
					t.Errorf("%s%s not listed", at.prefix, w.Name)
					continue
				}
				if g.Description != w.Description {
					t.Errorf("%s: description %q, want %q", g.Name, g.Description, w.Description)
				}
				if string(g.InputSchema) != string(w.InputSchema) {
					t.Errorf("%s: inputSchema\n%s\nwant the bank's bytes\n%s", g.Name, g.InputSchema, w.InputSchema)
				}
				if string(g.Annotations) != string(w.Annotations) {
					t.Errorf("%s: annotations %s, want %s", g.Name, g.Annotations, w.Annotations)
				}
			}
		})
	}
	// A path that names no connected server is no endpoint.
	req, _ := http.NewRequest(http.MethodPost, g.url+"/mcp/nobank", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+userToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/mcp/nobank answered %d, want 404", resp.StatusCode)
	}
}

func TestGatedCallAsksTheUserAndExecutesOnce(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
	sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
	mark := s.mark(t)

	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("call failed: %s %v", text(res), res.Meta)
	}
	forms := u.shown()
	if len(forms) < 2 {
		t.Fatalf("want a value round and an approval round, got %d forms: %v", len(forms), forms)
	}
	for _, f := range forms {
		for _, leak := range []string{"999-888-777", "500000", `"default"`, "bank.transfer"} {
			if strings.Contains(f, leak) {
				t.Errorf("form shows %s: %s", leak, f)
			}
		}
	}
	if !strings.Contains(forms[len(forms)-1], "110-222-333") {
		t.Errorf("the approval form does not show what is approved: %s", forms[len(forms)-1])
	}
	transfers := only(mustCalls(t, s, mark), "transfer")
	if len(transfers) != 1 {
		t.Fatalf("bank saw %d transfer calls, want exactly 1: %+v", len(transfers), transfers)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(transfers[0].Arguments), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["to_account"] != "110-222-333" || sent["amount"] != float64(1000) || sent["from_account"] != "1102534471" {
		t.Errorf("bank received %v, want the user's answers", sent)
	}
	if res.Meta["io.verdict/execution_record"] == nil {
		t.Errorf("result carries no execution record id: %v", res.Meta)
	}
	if strings.Contains(text(res)+string(mustJSON(res.Meta)), "eyJ") {
		t.Errorf("result carries a JWS: %s %v", text(res), res.Meta)
	}
}

func TestModelValueNeverRunsWithoutTheUser(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			u := &user{action: action}
			sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
			mark := s.mark(t)
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || reason(res) != "declined" {
				t.Fatalf("want a declined tool error, got isError=%v %q %v", res.IsError, text(res), res.Meta)
			}
			if strings.Contains(text(res), "transfer") {
				t.Errorf("error names the tool: %q", text(res))
			}
			if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
				t.Fatalf("bank saw %d transfer calls after the user said %s", n, action)
			}
		})
	}
	t.Run("approval left unticked", func(t *testing.T) {
		u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 1000}}
		refuse := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			res, err := u.answer(ctx, req)
			for k, v := range res.Content {
				if v == true {
					delete(res.Content, k)
				}
			}
			return res, err
		}
		sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: refuse})
		mark := s.mark(t)
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
		if err == nil && !res.IsError {
			t.Fatalf("an unapproved call ran: %s", text(res))
		}
		if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
			t.Fatalf("bank saw %d transfer calls without approval", n)
		}
	})
}

func TestRequestStateForgedOrReplayed(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	manual := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	sess := g.connect(t, userToken, manual)
	other := g.connect(t, otherToken, manual)
	ctx := ctxT(t)
	mark := s.mark(t)

	first, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: modelArgs()})
	if err != nil {
		t.Fatal(err)
	}
	if !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("want input_required with a requestState, got %s %v", text(first), first.Meta)
	}
	if _, ok := first.InputRequests["answers"].(*mcp.ElicitParams); !ok {
		t.Fatalf("input requests: %v", first.InputRequests)
	}
	answers := mcp.InputResponseMap{"answers": &mcp.ElicitResult{Action: "accept",
		Content: map[string]any{"to_account": "110-222-333", "amount": 1000}}}
	retry := func(sess *mcp.ClientSession, state string, args map[string]any, resp mcp.InputResponseMap) *mcp.CallToolResult {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "bank.transfer", Arguments: args,
			RequestState: state, InputResponses: resp})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	st := first.RequestState
	parts := strings.Split(st, ".")
	otherArgs := modelArgs()
	otherArgs["amount"] = 500001

	for _, c := range []struct {
		name  string
		sess  *mcp.ClientSession
		state string
		args  map[string]any
		want  string
	}{
		{"mac flipped", sess, parts[0] + "." + parts[1] + "." + flip(parts[2]), modelArgs(), "request_state_invalid"},
		{"payload rewritten", sess, parts[0] + "." + rewrite(t, parts[1]) + "." + parts[2], modelArgs(), "request_state_invalid"},
		{"made up", sess, "v1.e30.AAAA", modelArgs(), "request_state_invalid"},
		{"not a token", sess, "hello", modelArgs(), "request_state_invalid"},
		{"other arguments", sess, st, otherArgs, "request_state_mismatch"},
		{"other principal", other, st, modelArgs(), "request_state_mismatch"},
	} {
		res := retry(c.sess, c.state, c.args, answers)
		if !res.IsError || reason(res) != c.want {
			t.Errorf("%s: got isError=%v reason %q (%s), want %s", c.name, res.IsError, reason(res), text(res), c.want)
		}
	}

	next := retry(sess, st, modelArgs(), answers)
	if next.IsError || !next.NeedsInput() {
		t.Fatalf("the genuine answer was not taken: %s %v", text(next), next.Meta)
	}
	if res := retry(sess, st, modelArgs(), answers); !res.IsError || reason(res) != "request_state_replayed" {
		t.Errorf("replay: got isError=%v reason %q, want request_state_replayed", res.IsError, reason(res))
	}
	if res := retry(sess, "", modelArgs(), answers); !res.IsError || reason(res) != "request_state_missing" {
		t.Errorf("answers without a state: got isError=%v reason %q, want request_state_missing", res.IsError, reason(res))
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
		t.Fatalf("bank saw %d transfer calls", n)
	}
	if v := g.metric(t, `mcpgate_request_state_refused_total{reason="request_state_invalid"}`); v != 4 {
		t.Errorf("request_state_invalid refusals counted %v, want 4", v)
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

// rewrite re-encodes a token payload for another principal.
func rewrite(t *testing.T, payload string) string {
	t.Helper()
	b, err := b64.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["p"] = "u_02"
	b, _ = json.Marshal(m)
	return b64.EncodeToString(b)
}

// TestOlderClientIsAskedInPlaceOverStdio: a stdio host is asked with
// elicitation/create and runs the user's call once, offered every server's
// tools as "<server>.<tool>", or with --server one server's under their own
// names.
func TestOlderClientIsAskedInPlaceOverStdio(t *testing.T) {
	s := bankStack(t)
	for _, tc := range []struct {
		flags []string
		tool  string
	}{
		{nil, "bank.transfer"},
		{[]string{"--server", "bank"}, "transfer"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			u := &user{values: map[string]any{"to_account": "110-222-333", "amount": 700}}
			sess, logPath := stdioGateway(t, s.gatewayConfig(t.TempDir()), &mcp.ClientOptions{ElicitationHandler: u.answer}, "2025-06-18", tc.flags...)
			ctx := ctxT(t)
			listed, err := sess.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(listed.Tools, func(tl *mcp.Tool) bool { return tl.Name == tc.tool }) {
				t.Fatalf("tools/list lacks %s", tc.tool)
			}
			mark := s.mark(t)
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: modelArgs()})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("call failed: %s %v\n%s", text(res), res.Meta, readFile(logPath))
			}
			if len(u.shown()) < 2 {
				t.Errorf("want elicitation/create rounds, got %d", len(u.shown()))
			}
			transfers := only(mustCalls(t, s, mark), "transfer")
			if len(transfers) != 1 || !strings.Contains(transfers[0].Arguments, `"amount":700`) {
				t.Fatalf("bank saw %+v, want one transfer of the user's amount", transfers)
			}
		})
	}
}

// TestStdioServerFlag: --server names a server the gateway connects to, and
// only with --stdio; anything else stops the start with the reason.
func TestStdioServerFlag(t *testing.T) {
	s := bankStack(t)
	dir := t.TempDir()
	cfg := s.gatewayConfig(dir)
	path := filepath.Join(dir, "mcpgate.yaml")
	if err := writeJSON(path, cfg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		say   string
	}{
		{"unknown server", []string{"--stdio", "--server", "nobank"}, 1, `--server: server \"nobank\" is not a server of the policy`},
		{"without stdio", []string{"--server", "bank"}, 2, "--server chooses what --stdio offers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bins["mcpgate"], append([]string{"serve", "--config", path}, tc.flags...)...)
			cmd.Stdin = strings.NewReader("")
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
				t.Fatalf("exit %v, want status %d\n%s", err, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.say) {
				t.Errorf("stderr does not say %q:\n%s", tc.say, stderr.String())
			}
		})
	}
}

func TestReadToolPassesThrough(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	sess := g.connect(t, userToken, nil) // no elicitation: nothing may need it
	mark := s.mark(t)
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": "220-555-010"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("read failed: %s", text(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if sc["account"] != "220-555-010" {
		t.Errorf("structured content %v", res.StructuredContent)
	}
	if c := mustCalls(t, s, mark); len(c) != 1 || c[0].Tool != "get_balance" {
		t.Errorf("bank saw %+v, want one get_balance", c)
	}
	if v := g.metric(t, `mcpgate_calls_total{class="read",result="ok"}`); v != 1 {
		t.Errorf("read calls counted %v, want 1", v)
	}
	if v := g.metric(t, `mcpgate_observe_mode`); v != 0 {
		t.Errorf("mcpgate_observe_mode %v in enforce mode", v)
	}
}

// TestHTTPNeedsAPrincipalToken checks the refusals of the gateway's HTTP endpoint with static
// tokens: without a principal's token /mcp is 401 in the error envelope with a Bearer
// challenge (RFC 6750 §3; error="invalid_token" when a token was sent), and any other path or
// method is 404 not_found, both validated with api/openapi.yaml's error envelope.
func TestHTTPNeedsAPrincipalToken(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	spec := apitest.Load(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	send := func(method, path, token string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, g.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
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
		return resp, b
	}
	for _, tt := range []struct{ name, token, challenge string }{
		{"none", "", `Bearer realm="mcpgate"`},
		{"unknown", "not-a-token", `Bearer realm="mcpgate", error="invalid_token"`},
		{"hash itself", "deadbeef", `Bearer realm="mcpgate", error="invalid_token"`},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			resp, b := send(method, "/mcp", tt.token)
			spec.CheckEnvelope(t, tt.name+" "+method+" /mcp", resp, b, http.StatusUnauthorized, "unauthorized")
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("%s %s: WWW-Authenticate %q, want %q", tt.name, method, got, tt.challenge)
			}
		}
	}
	for _, tt := range []struct{ method, path string }{
		{"GET", "/"}, {"POST", "/"}, {"POST", "/mcp/x"}, {"GET", "/v1/preflight"},
		{"POST", "/healthz"}, {"DELETE", "/readyz"}, {"PUT", "/metrics"},
	} {
		resp, b := send(tt.method, tt.path, "")
		spec.CheckEnvelope(t, tt.method+" "+tt.path, resp, b, http.StatusNotFound, "not_found")
	}
}

func TestObserveModeRecordsWouldBeHoldWhileTheCallProceeds(t *testing.T) {
	s := bankStack(t)
	cfg := s.gatewayConfig(t.TempDir())
	cfg["mode"] = "observe"
	g := startGateway(t, cfg, "--observe")
	sess := g.connect(t, userToken, nil)
	mark := s.mark(t)

	said := "Please send money: 1,500,000 won to account 330-000-001."
	meta := mcp.Meta{
		"io.verdict/instruction": []map[string]any{{"text": said, "trust": "user", "origin": "chat"}},
		"io.verdict/intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": span(said, "send money")}},
		"io.verdict/locations": map[string]any{
			"amount":     map[string]any{"segment": 0, "span": span(said, "1,500,000")},
			"to_account": map[string]any{"segment": 0, "span": span(said, "330-000-001")},
		},
	}
	args := map[string]any{"from_account": "1102534471", "to_account": "330-000-001", "amount": 1500000}
	if _, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Meta: meta, Name: "bank.transfer", Arguments: args}); err != nil {
		t.Fatal(err)
	}
	if n := len(only(mustCalls(t, s, mark), "transfer")); n != 1 {
		t.Fatalf("bank saw %d transfer calls, want the forwarded one", n)
	}
	if v := g.metric(t, "mcpgate_observe_mode"); v != 1 {
		t.Errorf("mcpgate_observe_mode %v, want 1", v)
	}
	if v := g.metric(t, `mcpgate_would_block_total{outcome="hold"}`); v != 1 {
		t.Errorf(`mcpgate_would_block_total{outcome="hold"} %v, want 1`, v)
	}
	log := readFile(g.log)
	if !strings.Contains(log, "OBSERVE MODE") || !strings.Contains(log, `"would_be_outcome":"hold"`) {
		t.Errorf("log lacks the observe warning or the would-be hold:\n%s", log)
	}
}

func TestObserveNeedsFlagAndConfig(t *testing.T) {
	s := bankStack(t)
	for _, c := range []struct {
		name, mode string
		flag       bool
	}{
		{"config without flag", "observe", false},
		{"flag without config", "enforce", true},
		{"flag with default mode", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := s.gatewayConfig(dir)
			if c.mode != "" {
				cfg["mode"] = c.mode
			}
			path := filepath.Join(dir, "mcpgate.yaml")
			if err := writeJSON(path, cfg); err != nil {
				t.Fatal(err)
			}
			args := []string{"serve", "--config", path}
			if c.flag {
				args = append(args, "--observe")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bins["mcpgate"], args...).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\n%s", err, out)
			}
			if !strings.Contains(string(out), "observe mode needs both") {
				t.Errorf("output does not say why:\n%s", out)
			}
		})
	}
}

func TestFilesystemServerUpstream(t *testing.T) {
	buildBins(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		testtool.Missing(t, "npx not found: "+err.Error())
	}
	root := t.TempDir()
	server := []string{npx, "-y", "@modelcontextprotocol/server-filesystem", root}
	// The first use downloads the package; do it once, before three
	// processes race to.
	warm, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(warm, server[0], server[1:]...).CombinedOutput(); err != nil {
		testtool.Missing(t, "npx could not run the filesystem server: "+err.Error()+": "+string(out))
	}
	dir, err := os.MkdirTemp("", "mcpgate-fs-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir}
	t.Cleanup(s.stop)
	argv, _ := json.Marshal(server)
	policy := `policy_version: "mcpgate-fs-test.1"
servers:
  fs:
    audience: ["executor-test"]
    tools_from: {command: ` + string(argv) + `}
tools:
  fs/write_file: {class: irreversible, actions: ["write file", "save a file"], when_cases: [immediate]}
  fs/read_text_file: {class: read}
  fs/list_allowed_directories: {class: read}
`
	if err := s.startGate([]byte(policy), map[string]any{"fs": map[string]any{"command": server}}); err != nil {
		t.Fatal(err)
	}
	cfg := s.gatewayConfig(t.TempDir())
	cfg["tools"] = map[string]any{"fs/write_file": map[string]any{"action_name_preset": "write file", "when_case": "immediate"}}
	g := startGateway(t, cfg)

	file := filepath.Join(root, "note.txt")
	u := &user{values: map[string]any{"path": file, "content": "typed by the user"}}
	sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
	ctx := ctxT(t)
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "fs.write_file" }) {
		t.Fatalf("fs.write_file not listed")
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write_file",
		Arguments: map[string]any{"path": file, "content": "what the model wrote"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("write failed: %s %v\nverdictd:\n%s", text(res), res.Meta, readFile(s.path("verdictd.log")))
	}
	for _, f := range u.shown() {
		if strings.Contains(f, "what the model wrote") {
			t.Errorf("form pre-fills the model's text: %s", f)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != "typed by the user" {
		t.Fatalf("file holds %q (%v), want the user's text", got, err)
	}
	read, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read_text_file", Arguments: map[string]any{"path": file}})
	if err != nil {
		t.Fatal(err)
	}
	if read.IsError || !strings.Contains(text(read), "typed by the user") {
		t.Errorf("read through the gateway: %s", text(read))
	}
}

func mustCalls(t testing.TB, s *stack, from int) []bankCall {
	c, _ := s.calls(t, from)
	return c
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// span is the [start, end) code-point span of the first sub in text.
func span(text, sub string) []int {
	i := strings.Index(text, sub)
	if i < 0 {
		panic("no " + sub)
	}
	start := utf8.RuneCountInString(text[:i])
	return []int{start, start + utf8.RuneCountInString(sub)}
}

// A host's _meta locations are held to the grounding rule like any request's: a span over a
// piece of what the user typed grounds nothing, and the value is asked.
func TestMetaSpanInsideATokenIsAsked(t *testing.T) {
	s := bankStack(t)
	g := startGateway(t, s.gatewayConfig(t.TempDir()))
	said := "Please send money: 15000 won to account 330-000-0015."
	// askedFor returns the value (non-boolean) fields of the first form the user was shown.
	askedFor := func(amount, to string, value map[string]any) map[string]bool {
		u := &user{action: "decline"}
		sess := g.connect(t, userToken, &mcp.ClientOptions{ElicitationHandler: u.answer})
		mark := s.mark(t)
		meta := mcp.Meta{
			"io.verdict/instruction": []map[string]any{{"text": said, "trust": "user", "origin": "chat"}},
			"io.verdict/intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": span(said, "send money")}},
			"io.verdict/locations": map[string]any{
				"amount":     map[string]any{"segment": 0, "span": span(said, amount)},
				"to_account": map[string]any{"segment": 0, "span": span(said, to)},
			},
		}
		if _, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Meta: meta, Name: "bank.transfer", Arguments: value}); err != nil {
			t.Fatal(err)
		}
		if n := len(only(mustCalls(t, s, mark), "transfer")); n != 0 {
			t.Fatalf("bank saw %d transfer calls after the user declined", n)
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		if len(u.forms) == 0 {
			t.Fatal("the user was shown nothing")
		}
		var schema struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		b, _ := json.Marshal(u.forms[0].RequestedSchema)
		json.Unmarshal(b, &schema)
		out := map[string]bool{}
		for k, p := range schema.Properties {
			if p["type"] != "boolean" {
				out[k] = true
			}
		}
		return out
	}
	whole := askedFor("15000", "330-000-0015", map[string]any{"from_account": "1102534471", "to_account": "330-000-0015", "amount": 15000})
	if whole["to_account"] || whole["amount"] {
		t.Errorf("whole tokens were asked again: %v", whole)
	}
	partial := askedFor("1500", "330-000-001", map[string]any{"from_account": "1102534471", "to_account": "330-000-001", "amount": 1500})
	if !partial["to_account"] || !partial["amount"] {
		t.Errorf("pieces of tokens grounded: the form asked only %v", partial)
	}
}
