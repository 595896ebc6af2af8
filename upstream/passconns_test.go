package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/plainhttp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// seenCall is a plain tools/call as the server received it.
type seenCall struct {
	method, uri, host, proto, remote string
	length                           int64
	header                           http.Header
	body                             string
}

// recordingServer serves plainServer's tools and records every plain
// tools/call; hold, when set, is called before one is served.
type recordingServer struct {
	hs    *httptest.Server
	conns atomic.Int64 // connections accepted
	mu    sync.Mutex
	seen  []seenCall
	hold  func()
	// cancels receives the body of every notifications/cancelled.
	cancels chan string
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	rs := &recordingServer{cancels: make(chan string, 8)}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plainServer() },
		&mcp.StreamableHTTPOptions{Stateless: true})
	rs.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"notifications/cancelled"`)) {
			select {
			case rs.cancels <- string(b):
			default:
			}
		}
		if bytes.Contains(b, []byte(`"id":4503599627`)) {
			rs.mu.Lock()
			rs.seen = append(rs.seen, seenCall{r.Method, r.RequestURI, r.Host, r.Proto, r.RemoteAddr, r.ContentLength, r.Header.Clone(), string(b)})
			hold := rs.hold
			rs.mu.Unlock()
			if hold != nil {
				hold()
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	rs.hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rs.conns.Add(1)
		}
	}
	rs.hs.Start()
	t.Cleanup(rs.hs.Close)
	return rs
}

func (rs *recordingServer) last(t *testing.T) seenCall {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.seen) == 0 {
		t.Fatal("no plain call received")
	}
	return rs.seen[len(rs.seen)-1]
}

// dialPlainConns dials url, lists its tools and returns the client and the text
// tool's definition.
func dialPlainConns(t *testing.T, url string, o Options) (*Client, json.RawMessage) {
	t.Helper()
	c, err := Dial(testContext(t), "plain", Config{URL: url, Headers: map[string]string{"X-Api-Key": "k1"}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Name == "text" {
			return c, tl.Raw
		}
	}
	t.Fatal("no text tool")
	return nil, nil
}

// A plain call sent without the Transport reaches the server as the
// Transport sends it: method, target, host, protocol, length, every header
// and the body.
func TestPlainConnsSendWhatTheTransportSends(t *testing.T) {
	rs := newRecordingServer(t)
	own, def := dialPlainConns(t, rs.hs.URL+"/mcp?x=1", testOptions(t))
	o := testOptions(t)
	o.HTTPClient = &http.Client{}
	std, _ := dialPlainConns(t, rs.hs.URL+"/mcp?x=1", o)
	if own.plainAddr == "" || std.plainAddr != "" {
		t.Fatalf("plain addresses %q and %q", own.plainAddr, std.plainAddr)
	}
	args := json.RawMessage(`{"a": [1, "é<>"]}`)
	if _, _, err := own.Call(testContext(t), ToolCall{Tool: "text", Args: args, Definition: def, PassThrough: true}); err != nil {
		t.Fatal(err)
	}
	got := rs.last(t)
	if _, _, err := std.Call(testContext(t), ToolCall{Tool: "text", Args: args, Definition: def, PassThrough: true}); err != nil {
		t.Fatal(err)
	}
	want := rs.last(t)
	got.remote, want.remote = "", ""
	if g, w := fmtSeen(got), fmtSeen(want); g != w {
		t.Fatalf("sent without the Transport:\n%s\nby the Transport:\n%s", g, w)
	}
}

func fmtSeen(c seenCall) string {
	var b bytes.Buffer
	b.WriteString(c.method + " " + c.uri + " " + c.proto + " host " + c.host + "\n")
	c.header.Write(&b)
	b.WriteString("\n" + c.body)
	return b.String() + " length " + strconv.FormatInt(c.length, 10)
}

// Plain calls keep one connection; one the server closed while idle is not
// used again, and a cancelled call's connection is not kept.
func TestPlainConnsKeepTheirConnection(t *testing.T) {
	rs := newRecordingServer(t)
	c, def := dialPlainConns(t, rs.hs.URL, testOptions(t))
	call := func() error {
		_, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def, PassThrough: true})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	n := rs.conns.Load()
	for range 5 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	if got := rs.conns.Load() - n; got != 0 {
		t.Fatalf("5 calls opened %d connections", got)
	}
	rs.hs.CloseClientConnections()
	waitIdleClosed(t, c)
	n = rs.conns.Load()
	if err := call(); err != nil {
		t.Fatalf("after the server closed the idle connection: %v", err)
	}
	if got := rs.conns.Load() - n; got != 1 {
		t.Fatalf("the call after the server closed the idle connection opened %d connections", got)
	}
	// A call cancelled while the server holds it.
	entered, release := make(chan struct{}), make(chan struct{})
	rs.mu.Lock()
	rs.hold = func() { entered <- struct{}{}; <-release }
	rs.mu.Unlock()
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Call(ctx, ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def, PassThrough: true})
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the call ended before the server held it: %v", err)
	}
	cancel()
	err := <-done
	close(release)
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	// The server is told: a closed response is no cancellation.
	held := rs.last(t)
	if note := <-rs.cancels; !strings.Contains(note, `"requestId":`+strings.TrimPrefix(regexp.MustCompile(`"id":\d+`).FindString(held.body), `"id":`)+`,`) {
		t.Fatalf("notifications/cancelled %s does not name the call %s", note, held.body)
	}
	rs.mu.Lock()
	rs.hold = nil
	rs.mu.Unlock()
	n = rs.conns.Load()
	if err := call(); err != nil {
		t.Fatalf("after a cancelled call: %v", err)
	}
	// The notification may have left a connection to reuse.
	if got := rs.conns.Load() - n; got > 1 {
		t.Fatalf("the call after a cancelled one opened %d connections", got)
	}
	// A kept connection that can no longer be written to: the call goes out
	// on a new one.
	kept := c.plainConns.Kept()
	if err := kept[len(kept)-1].(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := call(); err != nil {
		t.Fatalf("after the kept connection's writing end closed: %v", err)
	}
	// Closing the client closes what it kept.
	c.Close()
	if kept := c.plainConns.Kept(); len(kept) != 0 {
		t.Fatalf("after Close: %d kept", len(kept))
	}
}

// waitIdleClosed waits until the kept connection of c shows the close its server made: the
// server's FIN arrives when it arrives, and the test is about what a call does after it has.
func waitIdleClosed(t *testing.T, c *Client) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		kept := c.plainConns.Kept()
		if len(kept) == 0 || !plainhttp.ConnOpen(kept[len(kept)-1]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's close never reached the kept connection")
		}
	}
}

// TestExecutorCallsKeepTheTransport: the executor's calls (plain, not pass-through) go through
// net/http's Transport, never over the pass-through's own connections.
func TestExecutorCallsKeepTheTransport(t *testing.T) {
	rs := newRecordingServer(t)
	c, def := dialPlainConns(t, rs.hs.URL, testOptions(t))
	if c.plainAddr == "" {
		t.Fatal("the server is not one the pass-through sends to itself")
	}
	if _, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def}); err != nil {
		t.Fatal(err)
	}
	kept := len(c.plainConns.Kept())
	if kept != 0 {
		t.Fatalf("an executor's call left %d connections of the pass-through's own", kept)
	}
	if _, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def, PassThrough: true}); err != nil {
		t.Fatal(err)
	}
	kept = len(c.plainConns.Kept())
	if kept != 1 {
		t.Fatalf("a pass-through call kept %d connections of its own, want 1", kept)
	}
}

// A pass-through call the server answered with a redirect reached it: when the call sent again
// through the http.Client cannot connect (the server stopped listening meanwhile), its outcome
// is unknown, never "not sent".
func TestRedirectedPassThroughIsNeverUnsent(t *testing.T) {
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plainServer() },
		&mcp.StreamableHTTPOptions{Stateless: true})
	var hs *httptest.Server
	hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"id":4503599627370497`)) {
			// The call sent again finds nobody listening: no new connection, and none kept.
			hs.Listener.Close()
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			w.Header().Set("Location", "/moved")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c, def := dialPlainConns(t, hs.URL, testOptions(t))
	if c.plainAddr == "" {
		t.Fatal("the server is not one the pass-through sends to itself")
	}
	_, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def, PassThrough: true})
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("a redirected call whose second sending failed: %v, want outcome unknown", err)
	}
}
