package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chattyServer is an upstream MCP server of a revision before 2026-07-28,
// stateless (so that it logs at info level without being set a level) or
// in sessions (where it logs only once its client has set a level), whose
// tool chatty logs and reports progress during the call, each naming
// the caller ({"who": name}): once on arrival, and twice more once
// {"together": n} calls have arrived, so that n calls are in flight at
// once while they report. Each report is a log message, then progress.
func chattyServer(t *testing.T, stateless bool) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "chatty", Version: "1"}, nil)
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "chatty", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Who      string
			Together int
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		tok := req.Params.GetProgressToken()
		report := func(i int) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("%s %d", args.Who, i)})
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: args.Who})
			}
		}
		report(0)
		mu.Lock()
		if arrived++; arrived == args.Together {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		report(1)
		report(2)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done for " + args.Who}}}, nil
	})
	return olderHTTP(t, srv, stateless)
}

// samplingServer is an upstream MCP server of a revision before 2026-07-28,
// in sessions, whose tool sample asks the client's model during the call
// (sampling/createMessage) and answers with what the model said.
func samplingServer(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "sampling", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "sample", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out := "sampling failed"
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50, SystemPrompt: "Answer in one word.",
			IncludeContext: "allServers", Metadata: map[string]any{"provider": "x"},
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Which color\u200b?"}}}})
		if err == nil {
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				out = "model said: " + tc.Text + " (" + res.Model + ")"
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
	})
	return olderHTTP(t, srv, false)
}

// notesGateway runs a gateway in the test process whose policy adds
// chattyServer stateless ("chat") and in sessions ("chatsess") and
// samplingServer ("model") to the bank, their tools read, and returns it.
func notesGateway(t *testing.T) *gateway {
	t.Helper()
	s := bankStack(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	server := func(id, url string) string {
		return "  " + id + ":\n    audience: [\"executor-test\"]\n    tools_from: {url: \"" + url + "\"}\n"
	}
	writeAtomic(t, path, s.policyText(t, "notes.1",
		"servers:\n", "servers:\n"+server("chat", chattyServer(t, true))+
			server("chatsess", chattyServer(t, false))+server("model", samplingServer(t)),
		"tools:\n", "tools:\n  chat/chatty: {class: read}\n  chatsess/chatty: {class: read}\n  model/sample: {class: read}\n"))
	raw := s.gatewayConfig(dir)
	raw["policy"] = path
	gw, _ := runGateway(t, dir, raw)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &gateway{url: srv.URL}
}

// noteHost is a host that records the progress and log messages it is sent.
type noteHost struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	// third is closed with the third progress notification: the last the
	// call reports, sent after its last log message.
	third chan struct{}
	// each gets a value with every progress notification.
	each chan struct{}
}

func newNoteHost() *noteHost {
	return &noteHost{third: make(chan struct{}), each: make(chan struct{}, 64)}
}

// waitProgress waits for n more progress notifications.
func (h *noteHost) waitProgress(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.each:
		case <-ctxT(t).Done():
			t.Fatalf("the host got progress %v", h.progress)
		}
	}
}

func (h *noteHost) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.progress = append(h.progress, req.Params); len(h.progress) == 3 {
				close(h.third)
			}
			h.each <- struct{}{}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.logs = append(h.logs, req.Params)
		},
	}
}

// TestPassThroughProgressAndLogsReachOnlyTheirHost: two users' hosts (in
// sessions, each having set its log level) call the same read tool at once
// with progress tokens of their own; the server's progress and log
// messages during each call reach that call's host only, the progress under
// the host's own token and the log messages attributed to the server. A
// host that set no log level gets the progress and no log message.
func TestPassThroughProgressAndLogsReachOnlyTheirHost(t *testing.T) {
	g := notesGateway(t)
	call := func(h *noteHost, token, who string, setLevel bool, together int) {
		t.Helper()
		sess, err := g.connectAs(t, token, "2025-11-25", h.options())
		if err != nil {
			t.Error(err)
			return
		}
		if setLevel {
			if err := sess.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Error(err)
				return
			}
		}
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "chat.chatty", Meta: mcp.Meta{"progressToken": who + "-token"},
			Arguments: map[string]any{"who": who, "together": together}})
		if err != nil || res.IsError || text(res) != "done for "+who {
			t.Errorf("%s: %v %+v", who, err, res)
			return
		}
		// The host handles notifications in the order they came, apart from
		// the answer: once the last progress is in, so is every log message.
		select {
		case <-h.third:
		case <-ctxT(t).Done():
			t.Errorf("%s's host got progress %v", who, h.progress)
		}
	}
	check := func(h *noteHost, who string, logs int) {
		t.Helper()
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, p := range h.progress {
			if p.ProgressToken != who+"-token" || p.Message != who || p.Progress != float64(i) || p.Total != 2 {
				t.Errorf("%s's host got progress %d: %+v", who, i, p)
			}
		}
		if len(h.logs) != logs {
			t.Errorf("%s's host got %d log messages, want %d", who, len(h.logs), logs)
		}
		for i, l := range h.logs {
			if l.Data != fmt.Sprintf("%s %d", who, i) || l.Logger != "chat/chatty" || l.Level != "info" {
				t.Errorf("%s's host got log message %d: %+v", who, i, l)
			}
		}
	}
	alice, bob := newNoteHost(), newNoteHost()
	var wg sync.WaitGroup
	wg.Go(func() { call(alice, userToken, "alice", true, 2) })
	wg.Go(func() { call(bob, otherToken, "bob", true, 2) })
	wg.Wait()
	check(alice, "alice", 3)
	check(bob, "bob", 3)

	carol := newNoteHost()
	call(carol, userToken, "carol", false, 1)
	check(carol, "carol", 0)
}

// TestSessionLevelIsSetUpstream: a server in sessions logs only once its
// client has set a level. A host in a session that sets one has it set at
// its own connection to the server, whether it set it before that
// connection was made or after, and gets the server's log messages; until
// it sets one it gets none.
func TestSessionLevelIsSetUpstream(t *testing.T) {
	g := notesGateway(t)
	connect := func(h *noteHost, token string) *mcp.ClientSession {
		t.Helper()
		sess, err := g.connectAs(t, token, "2025-11-25", h.options())
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	setLevel := func(sess *mcp.ClientSession) {
		t.Helper()
		if err := sess.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	// call calls the tool as who and returns the log messages the host got
	// during the call.
	call := func(sess *mcp.ClientSession, h *noteHost, who string) []string {
		t.Helper()
		h.mu.Lock()
		before := len(h.logs)
		h.mu.Unlock()
		res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "chatsess.chatty", Meta: mcp.Meta{"progressToken": who},
			Arguments: map[string]any{"who": who, "together": 1}})
		if err != nil || res.IsError || text(res) != "done for "+who {
			t.Fatalf("%s: %v %+v", who, err, res)
		}
		// Once the last progress is in, so is every log message (see above).
		h.waitProgress(t, 3)
		h.mu.Lock()
		defer h.mu.Unlock()
		var got []string
		for _, l := range h.logs[before:] {
			if l.Logger != "chatsess/chatty" || l.Level != "info" {
				t.Errorf("%s's host got log message %+v", who, l)
			}
			got = append(got, fmt.Sprint(l.Data))
		}
		return got
	}
	want := func(who string) []string { return []string{who + " 0", who + " 1", who + " 2"} }

	alice := newNoteHost()
	as := connect(alice, userToken)
	setLevel(as) // before the session's connection to the server is made
	if got := call(as, alice, "alice"); !slices.Equal(got, want("alice")) {
		t.Errorf("alice's host got log messages %q, want %q", got, want("alice"))
	}

	dave := newNoteHost()
	ds := connect(dave, otherToken)
	if got := call(ds, dave, "dave-before"); len(got) != 0 {
		t.Errorf("a host that set no level got log messages %q", got)
	}
	setLevel(ds) // on the connection made for the first call
	if got := call(ds, dave, "dave-after"); !slices.Equal(got, want("dave-after")) {
		t.Errorf("dave's host got log messages %q, want %q", got, want("dave-after"))
	}
}

// TestPassThroughSamplingIsRelayed: a read tool's server that asks for
// sampling during the call has its request sent to a host in a session that
// declared sampling, attributed to the server in the system prompt, with the
// characters a host does not draw made visible and no context or provider
// metadata asked for; the host's message goes back. A host that declared no
// sampling, or a 2026-07-28 host (which cannot be asked in place), is not
// asked, and the server's request fails.
func TestPassThroughSamplingIsRelayed(t *testing.T) {
	g := notesGateway(t)
	for _, tc := range []struct {
		name, rev string
		declare   bool
		want      string
	}{
		{"a host that samples", "2025-11-25", true, "model said: green (host-model)"},
		{"a host that declared no sampling", "2025-11-25", false, "sampling failed"},
		{"a 2026-07-28 host", "2026-07-28", true, "sampling failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []*mcp.CreateMessageParams
			opts := &mcp.ClientOptions{}
			if tc.declare {
				opts.CreateMessageHandler = func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, req.Params)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "host-model", Content: &mcp.TextContent{Text: "green"}}, nil
				}
			}
			sess, err := g.connectAs(t, userToken, tc.rev, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "model.sample", Arguments: map[string]any{}})
			if err != nil || res.IsError || text(res) != tc.want {
				t.Fatalf("got %v %+v, want %q", err, res, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.want == "sampling failed" {
				if len(asked) != 0 {
					t.Fatalf("the host was asked: %+v", asked)
				}
				return
			}
			if len(asked) != 1 {
				t.Fatalf("the host was asked %d times", len(asked))
			}
			p := asked[0]
			b, _ := json.Marshal(p)
			if p.SystemPrompt != "[server model] Answer in one word." || p.IncludeContext != "" || p.Metadata != nil ||
				len(p.Messages) != 1 || p.MaxTokens != 50 {
				t.Errorf("the host was sent %s", b)
			}
			if tc, ok := p.Messages[0].Content.(*mcp.TextContent); !ok || !strings.HasPrefix(tc.Text, "Which color") ||
				strings.Contains(tc.Text, "\u200b") || !strings.Contains(tc.Text, "200B") {
				t.Errorf("the host was sent the message %s", b)
			}
		})
	}
}
