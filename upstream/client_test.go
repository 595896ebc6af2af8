package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/verdictgate/verdict/canonical"
)

func toolsByName(t *testing.T, tools []Tool) map[string]Tool {
	t.Helper()
	m := map[string]Tool{}
	for _, tl := range tools {
		m[tl.Name] = tl
	}
	return m
}

// sdkListTools lists tools through the SDK's decoded view.
func sdkListTools(t *testing.T, c *Client) (*mcp.ListToolsResult, error) {
	cn, err := c.acquire(testContext(t))
	if err != nil {
		return nil, err
	}
	defer cn.inflight.Done()
	return cn.sess.ListTools(testContext(t), nil)
}

func listTools(t *testing.T, c *Client) map[string]Tool {
	t.Helper()
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return toolsByName(t, tools)
}

func TestToolsListedWithStableDigests(t *testing.T) {
	digests := make(chan map[string]string, 3)
	check := func(t *testing.T, b *bank) {
		c := dial(t, b)
		first, second := listTools(t, c), listTools(t, c)
		got := map[string]string{}
		for _, name := range []string{"transfer", "schedule_transfer", "get_balance", "list_transactions"} {
			tl, ok := first[name]
			if !ok {
				t.Fatalf("%s not listed", name)
			}
			if tl.Err != nil || !strings.HasPrefix(tl.Digest, "sha256:") || len(tl.Digest) != len("sha256:")+64 {
				t.Fatalf("%s: digest %q, err %v", name, tl.Digest, tl.Err)
			}
			if tl.Server != "bank" {
				t.Errorf("%s: server %q, want the configured id", name, tl.Server)
			}
			if second[name].Digest != tl.Digest {
				t.Errorf("%s: digest changed between listings", name)
			}
			got[name] = tl.Digest
		}
		if !strings.Contains(first["transfer"].Description, "[Notice] Transfers are final.") {
			t.Errorf("transfer description lost its labels: %q", first["transfer"].Description)
		}
		// For an ordinary schema the raw bytes and the SDK's decoded
		// view must digest alike.
		res, err := sdkListTools(t, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range res.Tools {
			d, err := canonical.Digest(map[string]any{"name": st.Name, "description": st.Description, "inputSchema": st.InputSchema})
			if err != nil || d != got[st.Name] {
				t.Errorf("%s: SDK view digests to %q (%v), raw to %q", st.Name, d, err, got[st.Name])
			}
		}
		digests <- got
	}
	t.Run("group", func(t *testing.T) {
		transports(t, nil, check)
		// --json-response is a flag of the HTTP transport: a stdio bank has no such case.
		t.Run("http-json-response", func(t *testing.T) {
			t.Parallel()
			check(t, httpBank(t, "--json-response"))
		})
	})
	close(digests)
	var all []map[string]string
	for d := range digests {
		all = append(all, d)
	}
	for _, d := range all[1:] {
		for name, digest := range all[0] {
			if d[name] != digest {
				t.Errorf("%s: digest differs between transports", name)
			}
		}
	}
}

func TestDigestChangesWithSchemaVariant(t *testing.T) {
	seen := map[string]int{}
	var others string
	for variant := range 4 {
		b := stdioBank(t, "--schema-variant", string(rune('0'+variant)))
		tools := listTools(t, dial(t, b))
		tr := tools["transfer"]
		if tr.Err != nil {
			t.Fatalf("variant %d: %v", variant, tr.Err)
		}
		if v, dup := seen[tr.Digest]; dup {
			t.Errorf("variants %d and %d digest alike", v, variant)
		}
		seen[tr.Digest] = variant
		o := tools["get_balance"].Digest + tools["schedule_transfer"].Digest
		if others != "" && o != others {
			t.Errorf("variant %d changed the digests of other tools", variant)
		}
		others = o
		if variant == 3 && !strings.Contains(string(tr.InputSchema), `"$schema":"http://json-schema.org/draft-07/schema#"`) {
			t.Errorf("draft-07 $schema not kept: %s", tr.InputSchema)
		}
	}
}

// TestInexactSchemaNumberIsRefused pins why listings are read from the
// wire: the SDK's decoded schema rounds 9007199254740993 to ...992 and
// would digest cleanly, certifying a schema the server never sent.
func TestInexactSchemaNumberIsRefused(t *testing.T) {
	c := dial(t, stdioBank(t, "--schema-variant", "4"))
	tools := listTools(t, c)
	tr := tools["transfer"]
	if tr.Err == nil || tr.Digest != "" || !canonical.IsCode(tr.Err, canonical.CodeNumberNotExact) {
		t.Fatalf("transfer: digest %q, err %v; want refusal with %s", tr.Digest, tr.Err, canonical.CodeNumberNotExact)
	}
	if !strings.Contains(string(tr.Raw), "9007199254740993") {
		t.Errorf("raw definition altered: %s", tr.Raw)
	}
	if tools["get_balance"].Err != nil {
		t.Errorf("one bad definition spoiled another: %v", tools["get_balance"].Err)
	}
	res, err := sdkListTools(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range res.Tools {
		if st.Name != "transfer" {
			continue
		}
		b, _ := json.Marshal(st.InputSchema)
		if strings.Contains(string(b), "9007199254740993") {
			t.Skip("the SDK now keeps exact numbers; the raw capture is belt and braces")
		}
		if _, err := canonical.Digest(map[string]any{"name": st.Name, "description": st.Description, "inputSchema": st.InputSchema}); err != nil {
			t.Errorf("SDK view refused too (%v); this test no longer shows the rounding", err)
		}
	}
}

func TestCallSendsExactBytes(t *testing.T) {
	transports(t, nil, func(t *testing.T, b *bank) {
		c := dial(t, b)
		// Key order, escapes and non-ASCII text must arrive as sent.
		args := `{"to_account":"110-222-333","amount":1200,"memo":"rent \u00e9 é <b>&","from_account":"1102534471"}`
		res, err := callTool(testContext(t), c, "transfer", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("isError: %v", res.Content)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if !strings.Contains(string(sc), `"balance_after":1998800`) {
			t.Errorf("structured result %s", sc)
		}
		calls := b.callsTo(t, "transfer")
		if len(calls) != 1 || calls[0].args(t) != args {
			t.Fatalf("server received %d calls; first %q, want %q", len(calls), calls[0].args(t), args)
		}
		// Whitespace is the one thing the SDK changes: it compacts.
		if _, err := callTool(testContext(t), c, "get_balance", json.RawMessage("{ \"account\" :\n \"1102534471\" }")); err != nil {
			t.Fatal(err)
		}
		if got := b.callsTo(t, "get_balance")[0].args(t); got != `{"account":"1102534471"}` {
			t.Errorf("get_balance arrived as %q", got)
		}
	})
}

func TestCallIsErrorIsANormalResult(t *testing.T) {
	transports(t, nil, func(t *testing.T, b *bank) {
		c := dial(t, b)
		for _, args := range []string{
			`{"from_account":"1102534471","to_account":"110-222-333","amount":2000001}`, // insufficient funds
			`{"from_account":"1102534471","to_account":"999","amount":1}`,               // unknown account
			`{"from_account":"1102534471","to_account":"110-222-333","amount":"5"}`,     // server-side validation
		} {
			res, err := callTool(testContext(t), c, "transfer", json.RawMessage(args))
			if err != nil {
				t.Fatalf("%s: %v", args, err)
			}
			if !res.IsError {
				t.Errorf("%s: isError false", args)
			}
		}
	})
}

func TestCallRejected(t *testing.T) {
	transports(t, nil, func(t *testing.T, b *bank) {
		c := dial(t, b)
		_, err := callTool(testContext(t), c, "no_such_tool", json.RawMessage(`{}`))
		var werr *jsonrpc.Error
		if !errors.Is(err, ErrRejected) || !errors.As(err, &werr) {
			t.Errorf("unknown tool: %v, want ErrRejected carrying the JSON-RPC error", err)
		}
		for _, args := range []string{`[1]`, `"x"`, `{"a":`, `null`} {
			if _, err := callTool(testContext(t), c, "transfer", json.RawMessage(args)); !errors.Is(err, ErrRejected) {
				t.Errorf("arguments %s: %v, want ErrRejected", args, err)
			}
		}
		if n := len(b.callsTo(t, "transfer")); n != 0 {
			t.Errorf("%d malformed calls reached the server", n)
		}
	})
}

func TestHangingCallIsOutcomeUnknownAndNotRetried(t *testing.T) {
	transports(t, []string{"--hang"}, func(t *testing.T, b *bank) {
		c := dial(t, b)
		// The deadline passes once the server has the call, however long sending it took:
		// a fixed timeout could pass before a loaded machine sent anything.
		ctx := newLateDeadline(testContext(t))
		go func() {
			for len(b.callsTo(t, "transfer")) == 0 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			ctx.pass()
		}()
		_, err := callTool(ctx, c, "transfer", json.RawMessage(`{"from_account":"1102534471","to_account":"110-222-333","amount":5}`))
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want ErrOutcomeUnknown from the deadline", err)
		}
		// A later call goes through, and the hung transfer arrived exactly
		// once.
		if _, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`)); err != nil {
			t.Fatal(err)
		}
		if n := len(b.callsTo(t, "transfer")); n != 1 {
			t.Errorf("transfer arrived %d times, want 1", n)
		}
	})
}

// lateDeadline is a context whose deadline passes when the test says so: Done closes and Err
// is context.DeadlineExceeded, as when a timeout expires. It ends with its parent too.
type lateDeadline struct {
	context.Context // the parent, for its values
	done            chan struct{}

	mu  sync.Mutex
	err error
}

func newLateDeadline(parent context.Context) *lateDeadline {
	c := &lateDeadline{Context: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { c.end(parent.Err()) })
	return c
}

func (c *lateDeadline) pass() { c.end(context.DeadlineExceeded) }

func (c *lateDeadline) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

func (c *lateDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *lateDeadline) Done() <-chan struct{} { return c.done }

func (c *lateDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func TestChildKilledMidCall(t *testing.T) {
	b := stdioBank(t, "--delay", "1h")
	c := dial(t, b)
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(testContext(t), c, "transfer", json.RawMessage(`{"from_account":"1102534471","to_account":"110-222-333","amount":5}`))
		errc <- err
	}()
	first := b.waitForCall(t, "transfer", 1)
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err %v, want ErrOutcomeUnknown", err)
	}
	// The next call waits for the restarted child.
	res, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`))
	if err != nil || res.IsError {
		t.Fatalf("after restart: %v %v", err, res)
	}
	if got := b.callsTo(t, "get_balance"); got[0].PID == first.PID {
		t.Errorf("get_balance served by the killed process %d", first.PID)
	}
	if n := len(b.callsTo(t, "transfer")); n != 1 {
		t.Errorf("transfer arrived %d times, want 1", n)
	}
}

func TestHTTPServerRestart(t *testing.T) {
	b := httpBank(t)
	c := dial(t, b)
	if _, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`)); err != nil {
		t.Fatal(err)
	}
	b.stop()
	addr := strings.TrimSuffix(strings.TrimPrefix(b.cfg.URL, "http://"), "/mcp")
	ctx, cancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer cancel()
	if _, err := callTool(ctx, c, "get_balance", json.RawMessage(`{"account":"1102534471"}`)); err == nil {
		t.Fatal("call to a stopped server succeeded")
	}
	b.start(t, addr)
	res, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`))
	if err != nil || res.IsError {
		t.Fatalf("after restart: %v %v", err, res)
	}
}

func TestInputRequiredIsNotAnswered(t *testing.T) {
	transports(t, []string{"--input-required"}, func(t *testing.T, b *bank) {
		c := dial(t, b)
		res, err := callTool(testContext(t), c, "transfer", json.RawMessage(`{"from_account":"1102534471","to_account":"110-222-333","amount":5}`))
		if !errors.Is(err, ErrInputRequired) {
			t.Fatalf("err %v, want ErrInputRequired", err)
		}
		if res == nil || !res.NeedsInput() {
			t.Errorf("result %+v, want the input_required result", res)
		}
		if n := len(b.callsTo(t, "transfer")); n != 1 {
			t.Errorf("transfer arrived %d times: the client answered or retried", n)
		}
	})
}

func TestClosedClient(t *testing.T) {
	b := stdioBank(t)
	c := dial(t, b)
	c.Close()
	if _, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
	if _, err := c.Tools(testContext(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("tools after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDialFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(testContext(t), 10*time.Second)
	defer cancel()
	for name, cfg := range map[string]Config{
		"no such program": {Command: []string{"/nonexistent/bank"}},
		"exits at once":   {Command: []string{"/bin/false"}},
		"nothing listens": {URL: "http://127.0.0.1:1/mcp"},
	} {
		if _, err := Dial(ctx, "bank", cfg, testOptions(t)); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
}

// TestClientAdvertisesNothing checks what a real server sees of the
// client: no roots, sampling or elicitation capability, and the raw
// capture does not disturb the request metadata.
func TestClientAdvertisesNothing(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	seen := make(chan *mcp.ClientCapabilities, 1)
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seen <- req.ClientCapabilities()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	c, err := Dial(testContext(t), "probe", Config{URL: hs.URL}, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := callTool(testContext(t), c, "probe", nil); err != nil {
		t.Fatal(err)
	}
	caps := <-seen
	if caps == nil {
		t.Fatal("server saw no capabilities object")
	}
	if caps.Roots.ListChanged || caps.RootsV2 != nil || caps.Sampling != nil || caps.Elicitation != nil {
		t.Errorf("client advertises %+v", caps)
	}
}
