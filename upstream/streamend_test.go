package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bodyLedger is an HTTP transport that records whether every response body of a tools/call it
// handed out has been closed (the SDK's own requests, discovery and listing, are not held).
type bodyLedger struct {
	mu     sync.Mutex
	open   int
	posted int
}

func (l *bodyLedger) RoundTrip(r *http.Request) (*http.Response, error) {
	call := false
	if r.Method == http.MethodPost && r.GetBody != nil {
		if b, err := r.GetBody(); err == nil {
			sent, _ := io.ReadAll(b)
			call = bytes.Contains(sent, []byte(`"tools/call"`))
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !call {
		return resp, err
	}
	l.mu.Lock()
	l.open++
	l.posted++
	l.mu.Unlock()
	resp.Body = &ledgerBody{ReadCloser: resp.Body, l: l}
	return resp, nil
}

func (l *bodyLedger) counts() (open, posted int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.posted
}

type ledgerBody struct {
	io.ReadCloser
	l    *bodyLedger
	once sync.Once
}

func (b *ledgerBody) Close() error {
	b.once.Do(func() { b.l.mu.Lock(); b.l.open--; b.l.mu.Unlock() })
	return b.ReadCloser.Close()
}

func echoServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	return srv
}

// A call returns only once the event stream its response came on has been read to its end and
// closed, so the connection goes back to the pool before the next call instead of being closed
// under a cancelled context.
func TestCallReturnsAfterItsStreamEnds(t *testing.T) {
	srv := echoServer()
	for _, opts := range []struct {
		name string
		o    *mcp.StreamableHTTPOptions
	}{
		{"event stream", &mcp.StreamableHTTPOptions{Stateless: true}},
		{"json", &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
	} {
		t.Run(opts.name, func(t *testing.T) {
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts.o))
			t.Cleanup(hs.Close)
			ledger := &bodyLedger{}
			opt := testOptions(t)
			opt.HTTPClient = &http.Client{Transport: ledger}
			c, err := Dial(testContext(t), "echo", Config{URL: hs.URL}, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			for i := range 50 {
				ctx, cancel := context.WithCancel(testContext(t))
				_, err := callTool(ctx, c, "echo", json.RawMessage(`{}`))
				cancel() // what a caller does at once: it must not cut the stream short
				if err != nil {
					t.Fatal(err)
				}
				if open, posted := ledger.counts(); open != 0 {
					t.Fatalf("call %d returned with %d of %d response bodies open", i, open, posted)
				}
			}
		})
	}
}

// A server that keeps the stream open after the response holds the call until the call's
// context ends, and no longer: the call then returns (with its result, or as outcome unknown
// when the context ended before the response was read).
func TestCallOnAStreamLeftOpenEndsWithItsContext(t *testing.T) {
	srv := echoServer()
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	answered := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			http.NewResponseController(w).Flush()
			answered <- struct{}{}
			<-r.Context().Done() // the stream stays open until the client goes
		}
	}))
	t.Cleanup(hs.Close)
	c, err := Dial(testContext(t), "echo", Config{URL: hs.URL}, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithCancel(testContext(t))
	go func() { <-answered; cancel() }()
	res, err := callTool(ctx, c, "echo", json.RawMessage(`{}`))
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Call: %v, want the result or outcome unknown", err)
	}
	if err == nil && (res == nil || res.IsError) {
		t.Fatalf("Call: %+v, want the result", res)
	}
}

func TestStreamEndWait(t *testing.T) {
	closed := func() context.Context { return context.Background() }
	for _, tc := range []struct {
		name string
		run  func(s *streamEnd) context.Context // prepares s, returns the context to wait under
	}{
		{"nothing watched", func(*streamEnd) context.Context { return closed() }},
		{"body closed", func(s *streamEnd) context.Context {
			s.watch(io.NopCloser(bytes.NewReader(nil))).Close()
			return closed()
		}},
		{"body open, context ended", func(s *streamEnd) context.Context {
			s.watch(io.NopCloser(bytes.NewReader(nil)))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStreamEnd()
			s.wait(tc.run(s)) // returns: a hang fails the test by its timeout
		})
	}
	var none *streamEnd
	body := io.NopCloser(bytes.NewReader(nil))
	if none.watch(body) != body {
		t.Error("a call without a streamEnd had its body wrapped")
	}
}
