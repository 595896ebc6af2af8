package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRequestIsRelayedOnlyToItsOneCall: an elicitation/create or a
// sampling/createMessage names no call, so it is put to a call's Relay only
// when that call is the one call in flight on the connection and relays
// requests of its kind; with no call, two calls, or a call that does not
// relay it (the executor's, for one), it is refused and nobody is asked.
func TestRequestIsRelayedOnlyToItsOneCall(t *testing.T) {
	asked, sampled := 0, 0
	ask := Asker(func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	sample := Sampler(func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		sampled++
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "hi"}}, nil
	})
	both := &Relay{Ask: ask, Sample: sample}
	q := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Which color?"}}
	s := &mcp.CreateMessageRequest{Params: &mcp.CreateMessageParams{MaxTokens: 10}}
	for _, tc := range []struct {
		name           string
		calls          []*Relay
		asked, sampled bool
	}{
		{"no call in flight", nil, false, false},
		{"one call relaying nothing", []*Relay{nil}, false, false},
		{"one call relaying both", []*Relay{both}, true, true},
		{"one call relaying questions only", []*Relay{{Ask: ask}}, true, false},
		{"one call relaying sampling only", []*Relay{{Sample: sample}}, false, true},
		{"two calls, both relaying", []*Relay{both, both}, false, false},
		{"two calls, one relaying", []*Relay{both, nil}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{log: slog.New(slog.DiscardHandler)}
			var calls []*callRelay
			for _, rl := range tc.calls {
				calls = append(calls, c.track(rl, false))
			}
			beforeAsked, beforeSampled := asked, sampled
			qres, qerr := c.relayQuestion(t.Context(), q)
			sres, serr := c.relaySample(t.Context(), s)
			for _, cr := range calls {
				c.untrack(cr)
			}
			if tc.asked {
				if qerr != nil || qres.Action != "decline" || asked != beforeAsked+1 {
					t.Errorf("question not relayed: %v %v", qres, qerr)
				}
			} else if !errors.Is(qerr, ErrQuestionRefused) || asked != beforeAsked {
				t.Errorf("question relayed: %v %v", qres, qerr)
			}
			if tc.sampled {
				if serr != nil || serr == nil && sres.Model != "m" || sampled != beforeSampled+1 {
					t.Errorf("sampling request not relayed: %v %v", sres, serr)
				}
			} else if !errors.Is(serr, ErrQuestionRefused) || sampled != beforeSampled {
				t.Errorf("sampling request relayed: %v %v", sres, serr)
			}
		})
	}
}

// chattyTool reports progress and logs during the call, each naming the
// caller ({"who": name}): once on arrival, and twice more once {"together":
// n} calls have arrived, so that n calls are in flight at once while they
// report. It answers with the caller's name and whether it was sent a
// progress token.
func chattyTool() mcp.ToolHandler {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Who      string
			Together int
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		tok := req.Params.GetProgressToken()
		note := func(i int) {
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: args.Who})
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("%s %d", args.Who, i)})
		}
		note(0)
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
		note(1)
		note(2)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s token=%v", args.Who, tok != nil)}}}, nil
	}
}

// notes collects what one call's Relay is handed.
type notes struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (n *notes) relay() *Relay {
	return &Relay{LogLevel: "debug",
		Progress: func(p *mcp.ProgressNotificationParams) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.progress = append(n.progress, p)
		},
		Log: func(p *mcp.LoggingMessageParams) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.logs = append(n.logs, p)
		}}
}

// TestCallPassesOnOnlyItsOwnNotifications: two calls in flight at once on
// one connection each get their own server's progress (under no token of
// the server's choosing) and log messages, all of them, in order, before
// they return, and nothing of the other's: a plain call (a 2026-07-28
// server without a session), a call through the SDK over HTTP (a session),
// and over stdio, where a log message names no call and is passed to none.
// A call that relays nothing is sent no progress token.
func TestCallPassesOnOnlyItsOwnNotifications(t *testing.T) {
	httpServer := func(stateless bool) func(t *testing.T) Config {
		return func(t *testing.T) Config {
			srv := mcp.NewServer(&mcp.Implementation{Name: "chatty", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "chatty", InputSchema: json.RawMessage(`{"type":"object"}`)}, chattyTool())
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{Stateless: stateless}))
			t.Cleanup(hs.Close)
			return Config{URL: hs.URL}
		}
	}
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) Config
		plain  bool // calls are plain (passcall.go)
		logs   bool // log messages can be tied to the call
	}{
		{"plain", httpServer(true), true, true},
		{"session", httpServer(false), false, true},
		{"stdio", func(t *testing.T) Config { return helperConfig(t) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(testContext(t), "chatty", tc.config(t), testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			tools, err := c.Tools(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			var def json.RawMessage
			for _, tl := range tools {
				if tl.Name == "chatty" {
					def = tl.Raw
				}
			}
			if (c.plain.Load() != nil) != tc.plain {
				t.Fatalf("plain calls: %v, want %v", c.plain.Load() != nil, tc.plain)
			}
			// An older session's server sends log messages at the level the
			// connection set; from 2026-07-28 on, at the level each request names.
			if err := c.SetLoggingLevel(testContext(t), "debug"); err != nil && !errors.Is(err, ErrRejected) {
				t.Fatal(err)
			}
			who := []string{"alice", "bob"}
			got := make([]*notes, len(who))
			var wg sync.WaitGroup
			for i, name := range who {
				got[i] = &notes{}
				wg.Go(func() {
					res, _, err := c.Call(testContext(t), ToolCall{Tool: "chatty", Args: json.RawMessage(fmt.Sprintf(`{"who":%q,"together":2}`, name)), Definition: def, PassThrough: true, Relay: got[i].relay()})
					if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != name+" token=true" {
						t.Errorf("%s: %+v %v", name, res, err)
					}
				})
			}
			wg.Wait()
			for i, name := range who {
				n := got[i]
				n.mu.Lock()
				if len(n.progress) != 3 {
					t.Errorf("%s got %d progress notifications, want 3", name, len(n.progress))
				}
				for j, p := range n.progress {
					if p.Message != name || p.Progress != float64(j) || p.ProgressToken != nil {
						t.Errorf("%s's progress %d: %+v", name, j, p)
					}
				}
				wantLogs := 0
				if tc.logs {
					wantLogs = 3
				}
				if len(n.logs) != wantLogs {
					t.Errorf("%s got %d log messages, want %d", name, len(n.logs), wantLogs)
				}
				for j, l := range n.logs {
					if l.Data != fmt.Sprintf("%s %d", name, j) || l.Logger != "chatty" || l.Level != "info" {
						t.Errorf("%s's log message %d: %+v", name, j, l)
					}
				}
				n.mu.Unlock()
			}
			res, _, err := c.Call(testContext(t), ToolCall{Tool: "chatty", Args: json.RawMessage(`{"who":"carol","together":1}`), Definition: def, PassThrough: true})
			if err != nil || res.Content[0].(*mcp.TextContent).Text != "carol token=false" {
				t.Errorf("a call relaying nothing: %+v %v", res, err)
			}
		})
	}
}
