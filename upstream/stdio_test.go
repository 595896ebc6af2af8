package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperServerEnv makes the test binary run as a stdio MCP server (see
// TestMain), so that process-level behaviour is tested against the SDK's
// real server side.
const helperServerEnv = "UPSTREAM_TEST_HELPER_SERVER"

func runHelperServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	add := func(name string, h mcp.ToolHandler) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, h)
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add("echo", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(string(req.Params.Arguments)), nil
	})
	add("big", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ N int }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return text(strings.Repeat("x", args.N)), nil
	})
	add("exit", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	add("hang", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// {"arrived": path} creates path once the call is here, for a test that must act
		// while the call is in flight rather than guess when it is.
		var args struct{ Arrived string }
		if err := json.Unmarshal(req.Params.Arguments, &args); err == nil && args.Arrived != "" {
			if err := os.WriteFile(args.Arrived, nil, 0o600); err != nil {
				return nil, err
			}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	add("chatty", chattyTool())
	add("garbage", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Stdout.Write([]byte("this is not JSON\n"))
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "helper server:", err)
		return 1
	}
	return 0
}

func helperConfig(t testing.TB) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Command: []string{exe}, Env: map[string]string{helperServerEnv: "1"}}
}

func dialHelper(t testing.TB) *Client {
	t.Helper()
	c, err := Dial(testContext(t), "helper", helperConfig(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content %v", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

func TestStdioCalls(t *testing.T) {
	c := dialHelper(t)
	ctx := testContext(t)
	for _, n := range []int{0, 100, readBufferSize, 3 * readBufferSize, 2 << 20} {
		res, err := callTool(ctx, c, "big", json.RawMessage(`{"N":`+strconv.Itoa(n)+`}`))
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if got := resultText(t, res); got != strings.Repeat("x", n) {
			t.Errorf("n=%d: got %d bytes", n, len(got))
		}
	}
	// Concurrent calls each get their own answer.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			args := fmt.Sprintf(`{"i":%d,"memo":"<&> \u00e9"}`, i)
			res, err := callTool(ctx, c, "echo", json.RawMessage(args))
			if err != nil {
				t.Error(err)
				return
			}
			if got := resultText(t, res); got != args {
				t.Errorf("echo %s: got %s", args, got)
			}
		})
	}
	wg.Wait()
}

func TestStdioServerFailsMidCall(t *testing.T) {
	for _, tool := range []string{"exit", "garbage"} {
		t.Run(tool, func(t *testing.T) {
			c := dialHelper(t)
			_, err := callTool(testContext(t), c, tool, json.RawMessage(`{}`))
			var werr *jsonrpc.Error
			if !errors.Is(err, ErrOutcomeUnknown) || errors.As(err, &werr) {
				t.Fatalf("err %v, want ErrOutcomeUnknown without a JSON-RPC error", err)
			}
			// The client reconnects to a fresh child.
			res, err := callTool(testContext(t), c, "echo", json.RawMessage(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, res); got != `{"a":1}` {
				t.Errorf("after restart: %s", got)
			}
		})
	}
}

func TestStdioCloseWhileCallPending(t *testing.T) {
	c := dialHelper(t)
	arrived := filepath.Join(t.TempDir(), "arrived")
	args, _ := json.Marshal(map[string]string{"arrived": arrived})
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(testContext(t), c, "hang", args)
		errc <- err
	}()
	// Closed before the call is sent, the client would rightly say nothing ran (ErrClosed).
	ctx := testContext(t)
	for {
		if _, err := os.Stat(arrived); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("the call ended before reaching the server: %v", err)
		case <-ctx.Done():
			t.Fatal("the call never reached the server")
		case <-time.After(5 * time.Millisecond):
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrOutcomeUnknown) {
			t.Errorf("pending call: %v, want ErrOutcomeUnknown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pending call did not end after Close")
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestCommandTransportStopsStubbornChild checks the shutdown order: a
// child that ignores the end of its input is terminated.
func TestCommandTransportStopsStubbornChild(t *testing.T) {
	for name, script := range map[string]string{
		"sigterm": `exec sleep 60`,
		"sigkill": `trap '' TERM; while :; do sleep 1; done`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := &commandTransport{cmd: exec.Command("/bin/sh", "-c", script), terminate: 100 * time.Millisecond}
			conn, err := tr.Connect(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			// A Close that signalled nothing would wait on the child for ever: the test's
			// own timeout is the bound, not a measured duration.
			if err = conn.Close(); err == nil {
				t.Errorf("Close: %v, want the signal exit reported", err)
			}
			if _, err := conn.Read(testContext(t)); err != io.EOF {
				t.Errorf("Read after Close: %v, want io.EOF", err)
			}
			if err := conn.Write(testContext(t), mustCall(t, 1)); !errors.Is(err, mcp.ErrConnectionClosed) {
				t.Errorf("Write after Close: %v", err)
			}
		})
	}
}

// pipeConn is a stdioConn reading from a pipe the test writes to.
type pipeConn struct {
	*stdioConn
	in  *io.PipeWriter
	out *bytes.Buffer
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func newPipeConn(t *testing.T, maxLine int) *pipeConn {
	pr, pw := io.Pipe()
	out := &bytes.Buffer{}
	c := newStdioConn(pr, nopWriteCloser{out}, maxLine, nil)
	t.Cleanup(func() { c.Close(); pw.Close() })
	return &pipeConn{c, pw, out}
}

func readAll(t *testing.T, c *stdioConn) ([]jsonrpc.Message, error) {
	var msgs []jsonrpc.Message
	for {
		msg, err := c.Read(testContext(t))
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, msg)
	}
}

func TestStdioFraming(t *testing.T) {
	const (
		a = `{"jsonrpc":"2.0","id":1,"result":{"a":1}}`
		b = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":2}}`
	)
	long := `{"jsonrpc":"2.0","id":2,"result":{"text":"` + strings.Repeat("y", 3*readBufferSize) + `"}}`
	for _, tc := range []struct {
		name  string
		input string
		chunk int
		want  []string // wire forms of the messages
		err   error    // what ends the stream
	}{
		{"lf", a + "\n" + b + "\n", 1 << 20, []string{a, b}, io.EOF},
		{"crlf", a + "\r\n" + b + "\r\n", 1 << 20, []string{a, b}, io.EOF},
		{"split across reads", a + "\r\n" + b + "\n", 3, []string{a, b}, io.EOF},
		{"byte by byte", a + "\n" + b + "\n", 1, []string{a, b}, io.EOF},
		{"blank lines", "\n\r\n  \n" + a + "\n\n", 5, []string{a}, io.EOF},
		{"last line without newline", a + "\n" + b, 7, []string{a, b}, io.EOF},
		{"longer than the read buffer", long + "\n" + a + "\n", 4096, []string{long, a}, io.EOF},
		{"garbage line", a + "\nnot json\n" + b + "\n", 1 << 20, []string{a}, errInvalidMessage},
		{"two messages on a line", a + a + "\n", 1 << 20, nil, errInvalidMessage},
		{"batch", "[" + a + "]\n", 1 << 20, nil, errInvalidMessage},
		{"truncated at EOF", a + "\n" + b[:20], 1 << 20, []string{a}, errInvalidMessage},
		{"empty", "", 1, nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newStdioConn(&chunkReader{data: []byte(tc.input), n: tc.chunk}, nopWriteCloser{io.Discard}, maxLineLength, nil)
			defer c.Close()
			msgs, err := readAll(t, c)
			if !errors.Is(err, tc.err) {
				t.Errorf("stream ended with %v, want %v", err, tc.err)
			}
			var werr *jsonrpc.Error
			if errors.As(err, &werr) {
				t.Errorf("read error %v is a JSON-RPC error", err)
			}
			if len(msgs) != len(tc.want) {
				t.Fatalf("%d messages, want %d", len(msgs), len(tc.want))
			}
			for i, msg := range msgs {
				got, err := jsonrpc.EncodeMessage(msg)
				if err != nil || string(got) != tc.want[i] {
					t.Errorf("message %d: %.80s (%v), want %.80s", i, got, err, tc.want[i])
				}
			}
			// The error stays.
			if _, again := c.Read(testContext(t)); !errors.Is(again, tc.err) {
				t.Errorf("second Read: %v", again)
			}
		})
	}
}

func TestStdioLineLimit(t *testing.T) {
	const limit = 100
	msg := func(n int) string { // a message of exactly n bytes
		head, tail := `{"jsonrpc":"2.0","id":1,"result":"`, `"}`
		return head + strings.Repeat("z", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		name  string
		input string
		err   error
	}{
		{"at the limit", msg(limit) + "\n", io.EOF},
		{"at the limit with CR", msg(limit) + "\r\n", io.EOF},
		{"over the limit", msg(limit+1) + "\n", errLineTooLong},
		{"far over the limit", msg(100*limit) + "\n", errLineTooLong},
		{"over the limit without newline", msg(limit + 1), errLineTooLong},
		{"endless", strings.Repeat("a", 1<<20), errLineTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newStdioConn(&chunkReader{data: []byte(tc.input), n: 7}, nopWriteCloser{io.Discard}, limit, nil)
			defer c.Close()
			_, err := readAll(t, c)
			if !errors.Is(err, tc.err) {
				t.Errorf("got %v, want %v", err, tc.err)
			}
		})
	}
}

func TestStdioReadReturnsOnCloseAndCancel(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		c := newPipeConn(t, maxLineLength)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Read(testContext(t))
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		c.Close()
		select {
		case err := <-errc:
			if err != io.EOF {
				t.Errorf("Read: %v, want io.EOF", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Read did not return after Close")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		c := newPipeConn(t, maxLineLength)
		ctx, cancel := context.WithCancel(testContext(t))
		errc := make(chan error, 1)
		go func() {
			_, err := c.Read(ctx)
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Read: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Read did not return after cancel")
		}
		// The connection is still usable.
		go c.in.Write([]byte(`{"jsonrpc":"2.0","id":9,"result":{}}` + "\n"))
		if msg, err := c.Read(testContext(t)); err != nil || msg.(*jsonrpc.Response).ID.Raw() != int64(9) {
			t.Errorf("Read after cancel: %v %v", msg, err)
		}
	})
}

// TestStdioResultIsCopied checks that a delivered message does not alias
// the reader's buffer, which the next line overwrites.
func TestStdioResultIsCopied(t *testing.T) {
	c := newPipeConn(t, maxLineLength)
	go func() {
		c.in.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"v":"first"}}` + "\n"))
		c.in.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{"v":"other"}}` + "\n"))
	}()
	first, err := c.Read(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := string(first.(*jsonrpc.Response).Result); got != `{"v":"first"}` {
		t.Errorf("first result now %s", got)
	}
}

func TestStdioConcurrentWrites(t *testing.T) {
	c := newPipeConn(t, maxLineLength)
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			params := json.RawMessage(fmt.Sprintf(`{"i": %d, "pad": %q}`, i, strings.Repeat("p", i*100)))
			req := &jsonrpc.Request{ID: mustID(t, float64(i+1)), Method: "tools/call", Params: params}
			if err := c.Write(testContext(t), req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(c.out.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	seen := map[any]bool{}
	for _, line := range lines {
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatalf("line %.60s: %v", line, err)
		}
		seen[msg.(*jsonrpc.Request).ID.Raw()] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct requests, want %d", len(seen), n)
	}
}

func mustID(t testing.TB, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDecodeMessage(t *testing.T) {
	valid := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":-3,"result":null}`,
		`{"jsonrpc":"2.0","id":9007199254740992,"result":1}`,
		`{"jsonrpc":"2.0","id":"a-1","result":{}}`,
		` { "result" : { "x" : [ 1 , "}" ] } , "id" : 5 , "jsonrpc" : "2.0" } `,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no such tool"}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"x","data":{"why":"\"}"}}}`,
		`{"jsonrpc":"2.0","id":2,"result":{},"error":null}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"r","method":"roots/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"h\u00e9"}}`,
		`{"jsonrpc":"2.0","method":""}`,
		`{"jsonrpc":"2.0","\u0069d":1,"result":{}}`,
		`{"jsonrpc":"\u0032.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","method":"a\"b"}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"a\xffb\"}",
		`{"jsonrpc":"2.0","method":"\ud800x","params":{"s":"\ud83d\ude00"}}`,
		`{"jsonrpc":"2.0","id":-0,"result":1}`,
		`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", maxNesting-1) + strings.Repeat("]", maxNesting-1) + `}`,
	}
	for _, in := range valid {
		got, err := decodeMessage([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		want, err := jsonrpc.DecodeMessage([]byte(in))
		if err != nil {
			t.Fatalf("%s: the SDK refuses it: %v", in, err)
		}
		g, _ := jsonrpc.EncodeMessage(got)
		w, _ := jsonrpc.EncodeMessage(want)
		if string(g) != string(w) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("%s: decoded as %s, the SDK as %s", in, g, w)
		}
		if resp, ok := got.(*jsonrpc.Response); ok && resp.Error != nil {
			if _, ok := resp.Error.(*jsonrpc.Error); !ok {
				t.Errorf("%s: error is %T", in, resp.Error)
			}
		}
	}
	invalid := []string{
		``,
		`not json`,
		`"string"`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`,
		`[]`,
		`{"jsonrpc":"2.0","id":1,"result":{}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} {}`,
		`{"id":1,"result":{}}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":2.0,"id":1,"result":{}}`,
		`{"JSONRPC":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","ID":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"Result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"extra":true}`,
		`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":1.0,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e2,"result":{}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`,
		`{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"params":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":null}`,
		`{"jsonrpc":"2.0","id":1,"error":"boom"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":2}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","Code":2}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
		`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting) + `}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":` + strings.Repeat("{\"a\":", maxNesting) + "1" + strings.Repeat("}", maxNesting) + `}}`,
	}
	for _, in := range invalid {
		msg, err := decodeMessage([]byte(in))
		var werr *jsonrpc.Error
		if !errors.Is(err, errInvalidMessage) || errors.As(err, &werr) {
			t.Errorf("%s: decoded %v, err %v; want errInvalidMessage", in, msg, err)
		}
	}
}

// FuzzDecodeMessage checks that decodeMessage never accepts what the
// SDK's decoder refuses, and agrees with it on what both accept.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"m","data":[1]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeMessage(data)
		if err != nil {
			var werr *jsonrpc.Error
			if errors.As(err, &werr) {
				t.Fatalf("error %v is a JSON-RPC error", err)
			}
			return
		}
		want, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			t.Fatalf("accepted what the SDK refuses (%v): %q", err, data)
		}
		g, gerr := jsonrpc.EncodeMessage(got)
		w, werr := jsonrpc.EncodeMessage(want)
		if gerr != nil || werr != nil || !bytes.Equal(g, w) {
			t.Fatalf("decoded %s, the SDK %s (%v %v)", g, w, gerr, werr)
		}
	})
}

// repeatReader returns line forever.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.line[r.off:])
		n += k
		r.off = (r.off + k) % len(r.line)
	}
	return n, nil
}

func (r *repeatReader) Close() error { return nil }

// BenchmarkStdioRead compares reading one tools/call response off a
// stdio stream through the SDK's connection and through stdioConn.
func BenchmarkStdioRead(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"{\"account\":\"1102534471\",\"balance\":2000000,\"currency\":\"KRW\"}"}],"structuredContent":{"account":"1102534471","balance":2000000,"currency":"KRW"},"resultType":"complete"}}` + "\n")
	run := func(b *testing.B, conn mcp.Connection) {
		defer conn.Close()
		ctx := context.Background()
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.Read(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sdk", func(b *testing.B) {
		conn, err := (&mcp.IOTransport{Reader: &repeatReader{line: line}, Writer: nopWriteCloser{io.Discard}}).Connect(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		run(b, conn)
	})
	b.Run("stdio", func(b *testing.B) {
		run(b, newStdioConn(&repeatReader{line: line}, nopWriteCloser{io.Discard}, maxLineLength, nil))
	})
}

// BenchmarkStdioWrite compares writing one tools/call request.
func BenchmarkStdioWrite(b *testing.B) {
	req := &jsonrpc.Request{ID: mustID(b, float64(12)), Method: "tools/call",
		Params: json.RawMessage(`{"name":"transfer","arguments":{"amount":500000,"from_account":"1102534471","to_account":"110-222-333"}}`)}
	run := func(b *testing.B, conn mcp.Connection) {
		defer conn.Close()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := conn.Write(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sdk", func(b *testing.B) {
		conn, err := (&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader("")), Writer: nopWriteCloser{io.Discard}}).Connect(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		run(b, conn)
	})
	b.Run("stdio", func(b *testing.B) {
		run(b, newStdioConn(strings.NewReader(""), nopWriteCloser{io.Discard}, maxLineLength, nil))
	})
}

// BenchmarkStdioCall compares a tool call through Client with the same
// call through a bare SDK session on mcp.CommandTransport, against the
// helper server's echo tool. Only the client's side is measured.
func BenchmarkStdioCall(b *testing.B) {
	cfg := helperConfig(b)
	args := json.RawMessage(`{"amount":500000,"from_account":"1102534471","to_account":"110-222-333"}`)
	ctx := testContext(b)
	bench := func(b *testing.B, call func() error) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("client", func(b *testing.B) {
		c := dialHelper(b)
		bench(b, func() error {
			_, err := callTool(ctx, c, "echo", args)
			return err
		})
	})
	b.Run("sdk", func(b *testing.B) {
		cmd := exec.Command(cfg.Command[0])
		cmd.Env = childEnv(cfg.Env)
		cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{}, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		sess, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		bench(b, func() error {
			_, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			return err
		})
	})
}
