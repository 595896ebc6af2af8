package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// meterServerMode, as the value of helperServerEnv, makes the test binary
// run newMeterServer over stdio.
const meterServerMode = "meter"

// newMeterServer is a real go-sdk MCP server whose tool "reading" answers
// {"n": "<text>", "tag": "<tag>", "delay_ms": N} after N milliseconds with
// the structuredContent {"value":<text>,"tag":"<tag>"}, the text written
// verbatim: the server sends exactly the number literal it was given, not
// a Go value the SDK re-encodes.
func newMeterServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meter", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "reading", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				N       string `json:"n"`
				Tag     string `json:"tag"`
				DelayMS int    `json:"delay_ms"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			select {
			case <-time.After(time.Duration(args.DelayMS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			tag, _ := json.Marshal(args.Tag)
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: args.N}},
				StructuredContent: json.RawMessage(`{"value":` + args.N + `,"tag":` + string(tag) + `}`),
			}, nil
		})
	return srv
}

func runMeterServer() int {
	if err := newMeterServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "meter server:", err)
		return 1
	}
	return 0
}

// meterTransports runs f against a meter server over stdio and over
// streamable HTTP answering with SSE (stateful), with JSON (stateful) and
// statelessly (the 2026-07-28 revision).
func meterTransports(t *testing.T, f func(t *testing.T, c *Client)) {
	serve := func(opts *mcp.StreamableHTTPOptions) func(t *testing.T) Config {
		return func(t *testing.T) Config {
			srv := newMeterServer()
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
			t.Cleanup(hs.Close)
			return Config{URL: hs.URL}
		}
	}
	for _, tr := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"stdio", func(t *testing.T) Config {
			cfg := helperConfig(t)
			cfg.Env = map[string]string{helperServerEnv: meterServerMode}
			return cfg
		}},
		{"http-sse", serve(nil)},
		{"http-json", serve(&mcp.StreamableHTTPOptions{JSONResponse: true})},
		{"http-stateless", serve(&mcp.StreamableHTTPOptions{Stateless: true})},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			c, err := Dial(testContext(t), "meter", tr.cfg(t), testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			f(t, c)
		})
	}
}

func readingArgs(n, tag string, delay int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"n": n, "tag": tag, "delay_ms": delay})
	return b
}

// structured returns the structuredContent member of a raw result.
func structured(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("raw result %s: %v", raw, err)
	}
	return string(r.StructuredContent)
}

// TestRawCallKeepsTheNumbersAsSent: the decoded result rounds what a
// double cannot hold, the raw bytes hold the literal the server wrote.
func TestRawCallKeepsTheNumbersAsSent(t *testing.T) {
	meterTransports(t, func(t *testing.T, c *Client) {
		for _, n := range []string{"8.000000000000001", "0.10000000000000000001", "9007199254740993", "2.5", "1e400"} {
			res, raw, err := c.Call(testContext(t), ToolCall{Tool: "reading", Args: readingArgs(n, "x", 0), Raw: true})
			if n == "1e400" {
				// Beyond a double: the SDK cannot decode the result at all.
				if err == nil {
					t.Fatalf("%s: decoded as %v", n, res.StructuredContent)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if got, want := structured(t, raw), `{"value":`+n+`,"tag":"x"}`; got != want {
				t.Fatalf("raw structuredContent %s, want %s", got, want)
			}
			if res.IsError || res.StructuredContent == nil {
				t.Fatalf("%s: decoded result %+v", n, res)
			}
		}
	})
}

// TestRawCallConcurrentCallsKeepTheirOwnBytes: answers that arrive in
// another order than the requests went out, interleaved with calls that
// ask for no bytes, each reach the call that asked.
func TestRawCallConcurrentCallsKeepTheirOwnBytes(t *testing.T) {
	meterTransports(t, func(t *testing.T, c *Client) {
		const calls = 12
		var wg sync.WaitGroup
		errs := make(chan error, 2*calls)
		for i := range calls {
			wg.Add(2)
			go func() {
				defer wg.Done()
				n := fmt.Sprintf("%d.00000000000000000%d", i, i+1)
				tag := fmt.Sprintf("call-%d", i)
				// Later calls answer first.
				_, raw, err := c.Call(testContext(t), ToolCall{Tool: "reading", Args: readingArgs(n, tag, 10*(calls-i)), Raw: true})
				if err != nil {
					errs <- err
					return
				}
				var r struct {
					StructuredContent json.RawMessage `json:"structuredContent"`
				}
				if err := json.Unmarshal(raw, &r); err != nil {
					errs <- err
					return
				}
				if got, want := string(r.StructuredContent), `{"value":`+n+`,"tag":"`+tag+`"}`; got != want {
					errs <- fmt.Errorf("call %d got %s, want %s", i, got, want)
				}
			}()
			go func() {
				defer wg.Done()
				if _, err := callTool(testContext(t), c, "reading", readingArgs("1", "plain", 5*i)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestRawCallFailedCall: a failed call returns no bytes and leaves no
// slot behind on the connection.
func TestRawCallFailedCall(t *testing.T) {
	meterTransports(t, func(t *testing.T, c *Client) {
		ctx, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
		defer cancel()
		_, raw, err := c.Call(ctx, ToolCall{Tool: "reading", Args: readingArgs("1", "slow", 3000), Raw: true})
		if !errors.Is(err, ErrOutcomeUnknown) || raw != nil {
			t.Fatalf("err %v, raw %s", err, raw)
		}
		_, raw, err = c.Call(testContext(t), ToolCall{Tool: "no_such_tool", Raw: true})
		if !errors.Is(err, ErrRejected) || raw != nil {
			t.Fatalf("err %v, raw %s", err, raw)
		}
		if cn := current(c); cn != nil && cn.stdio != nil {
			waitFor(t, "the stdio slot table to empty", func() bool {
				return stdioTable(t, c).n.Load() == 0
			})
		}
		// The connection still serves raw calls.
		_, raw, err = c.Call(testContext(t), ToolCall{Tool: "reading", Args: readingArgs("3", "after", 0), Raw: true})
		if err != nil || structured(t, raw) != `{"value":3,"tag":"after"}` {
			t.Fatalf("err %v, raw %s", err, raw)
		}
	})
}

// stdioTable returns the call table of c's current stdio connection,
// found by filing a probe slot through a write on the session.
func stdioTable(t *testing.T, c *Client) *callTable {
	t.Helper()
	cn := current(c)
	if cn == nil {
		t.Fatal("no connection")
	}
	s := &rawSlot{}
	_, err := cn.sess.CallTool(withSlot(testContext(t), s), &mcp.CallToolParams{Name: "reading", Arguments: readingArgs("0", "probe", 0)})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		t.Fatal("the probe was not filed")
	}
	return s.table
}

// TestCallTableBindsConnectionAndID: a slot is filled only by the
// response with its request's id read on the connection it was filed on;
// anything that could confuse two calls leaves them without bytes.
func TestCallTableBindsConnectionAndID(t *testing.T) {
	call := func(id jsonrpc.ID) *jsonrpc.Request {
		return &jsonrpc.Request{ID: id, Method: methodCallTool, Params: json.RawMessage(`{}`)}
	}
	resp := func(id jsonrpc.ID, result string) *jsonrpc.Response {
		return &jsonrpc.Response{ID: id, Result: json.RawMessage(result)}
	}
	one, two := mustID(t, float64(1)), mustID(t, float64(2))

	t.Run("other connection, other id", func(t *testing.T) {
		a, b := &callTable{}, &callTable{}
		s := &rawSlot{}
		a.sent(withSlot(context.Background(), s), call(one))
		b.received(resp(one, `{"from":"b"}`))
		a.received(resp(two, `{"id":2}`))
		if got := s.take(); got != nil {
			t.Fatalf("filled with %s", got)
		}
		a.received(resp(one, `{"from":"a"}`))
		a.received(resp(one, `{"from":"a again"}`))
		if got := string(s.take()); got != `{"from":"a"}` {
			t.Fatalf("filled with %s", got)
		}
		if a.n.Load() != 0 || len(a.slots) != 0 {
			t.Fatal("slot left in the table")
		}
	})
	t.Run("no slot, not a call, a notification", func(t *testing.T) {
		a := &callTable{}
		s := &rawSlot{}
		ctx := withSlot(context.Background(), s)
		a.sent(context.Background(), call(one))
		a.sent(ctx, &jsonrpc.Request{ID: one, Method: methodListTools})
		a.sent(ctx, &jsonrpc.Request{Method: "notifications/cancelled"})
		if a.n.Load() != 0 || s.take() != nil {
			t.Fatal("filed")
		}
	})
	t.Run("two requests under one slot", func(t *testing.T) {
		a := &callTable{}
		s := &rawSlot{}
		ctx := withSlot(context.Background(), s)
		a.sent(ctx, call(one))
		a.sent(ctx, call(two))
		a.received(resp(one, `{}`))
		if got := s.take(); got != nil {
			t.Fatalf("ambiguous capture returned %s", got)
		}
	})
	t.Run("id reused while pending", func(t *testing.T) {
		a := &callTable{}
		s1, s2 := &rawSlot{}, &rawSlot{}
		a.sent(withSlot(context.Background(), s1), call(one))
		a.sent(withSlot(context.Background(), s2), call(one))
		a.received(resp(one, `{}`))
		if s1.take() != nil || s2.take() != nil {
			t.Fatal("a reused id was captured")
		}
	})
	t.Run("error response", func(t *testing.T) {
		a := &callTable{}
		s := &rawSlot{}
		a.sent(withSlot(context.Background(), s), call(one))
		a.received(&jsonrpc.Response{ID: one, Error: &jsonrpc.Error{Code: 1, Message: "no"}})
		if s.take() != nil {
			t.Fatal("an error was captured as a result")
		}
	})
	t.Run("released", func(t *testing.T) {
		a := &callTable{}
		s := &rawSlot{}
		a.sent(withSlot(context.Background(), s), call(one))
		s.release()
		if a.n.Load() != 0 || len(a.slots) != 0 {
			t.Fatal("slot left in the table")
		}
		a.received(resp(one, `{}`))
		if s.take() != nil {
			t.Fatal("filled after release")
		}
	})
}

// TestCaptureBodyFillsOnlyItsSlot: an SSE body carrying several messages
// fills the slot from the response with its id only, read in any chunking.
func TestCaptureBodyFillsOnlyItsSlot(t *testing.T) {
	body := "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{\"structuredContent\":{\"v\":1}}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"structuredContent\":{\"v\":0.10000000000000000001}}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"structuredContent\":{\"v\":3}}}\n\n"
	for chunk := 1; chunk <= len(body); chunk += 7 {
		s := &rawSlot{}
		s.bind(mustID(t, float64(7)))
		b := &captureBody{ReadCloser: ioNopCloser(&chunkReader{data: []byte(body), n: chunk}), sse: true, into: s}
		if _, err := io.Copy(io.Discard, b); err != nil {
			t.Fatal(err)
		}
		if got, want := string(s.take()), `{"structuredContent":{"v":0.10000000000000000001}}`; got != want {
			t.Fatalf("chunk %d: %s, want %s", chunk, got, want)
		}
	}
	if !strings.Contains(body, "\r\n") {
		t.Fatal("the body must mix line endings")
	}
}
