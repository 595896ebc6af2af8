package measure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// bankCmd is the examples/bank server, built on first use so that fuzzing and benchmarks that do
// not need it skip the build.
var bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")

func TestMain(m *testing.M) {
	if os.Getenv(meterEnv) != "" {
		// The test binary re-executed as a stdio MCP server.
		if err := newMeterServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "meter server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	bankCmd.Remove()
	os.Exit(code)
}

func bankBinary(t testing.TB) string { return bankCmd.Path(t) }

// bankClient starts a real bank MCP server over stdio with its demo ledger.
func bankClient(t testing.TB) *upstream.Client {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := upstream.Dial(ctx, "bank", upstream.Config{Command: []string{bankBinary(t), "--state", filepath.Join(dir, "state.json")}},
		upstream.Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// balanceServer is a real HTTP endpoint with a few behaviours to measure against.
func balanceServer(t testing.TB) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/balance", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch r.URL.Query().Get("account") {
		case "1102534471":
			fmt.Fprint(w, `{"account":"1102534471","balance":2000000,"owner":{"name":"u_01"},"tags":["a","b"]}`)
		case "closed":
			fmt.Fprint(w, `{"account":"closed","balance":null}`)
		case "a/b?c=d&e":
			fmt.Fprint(w, `{"balance":1}`)
		default:
			http.Error(w, `{"error":"no such account"}`, http.StatusNotFound)
		}
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `{"balance":1}`)
	})
	mux.HandleFunc("/problem", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		fmt.Fprint(w, `{"balance":7}`)
	})
	mux.HandleFunc("/dup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"balance":1,"balance":1000000}`)
	})
	mux.HandleFunc("/inexact", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"balance":9007199254740993}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"balance":"%s"}`, strings.Repeat("9", 2<<20))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/balance?account=1102534471", http.StatusFound)
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits
}

func httpM(url, pointer string) *policy.Measurement {
	return &policy.Measurement{Name: "balance", HTTP: &policy.HTTPMeasurement{URL: url, Pointer: pointer}}
}

func TestHTTP(t *testing.T) {
	srv, _ := balanceServer(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	acct := map[string]any{"account": "1102534471"}
	tests := []struct {
		name    string
		url     string
		pointer string
		inputs  map[string]any
		timeout time.Duration
		want    string // canonical JSON of the value
		kind    error
	}{
		{"balance", "/balance?account={{account}}", "/balance", acct, 0, `2000000`, nil},
		{"whole document", "/balance?account={{ account }}", "", acct, 0, `{"account":"1102534471","balance":2000000,"owner":{"name":"u_01"},"tags":["a","b"]}`, nil},
		{"nested and array", "/balance?account={{account}}", "/tags/1", acct, 0, `"b"`, nil},
		{"null is a value", "/balance?account={{account}}", "/balance", map[string]any{"account": "closed"}, 0, `null`, nil},
		{"escaped input", "/balance?account={{account}}", "/balance", map[string]any{"account": "a/b?c=d&e"}, 0, `1`, nil},
		{"number input", "/balance?account={{account}}", "/balance", map[string]any{"account": json.Number("1102534471")}, 0, `2000000`, nil},
		{"problem+json", "/problem", "/balance", nil, 0, `7`, nil},
		{"missing input", "/balance?account={{account}}", "/balance", nil, 0, "", ErrInput},
		{"object input", "/balance?account={{account}}", "/balance", map[string]any{"account": map[string]any{}}, 0, "", ErrInput},
		{"not found", "/balance?account={{account}}", "/balance", map[string]any{"account": "nobody"}, 0, "", ErrStatus},
		{"down", "/down", "/balance", nil, 0, "", ErrStatus},
		{"redirect not followed", "/redirect", "/balance", nil, 0, "", ErrStatus},
		{"html", "/html", "/balance", nil, 0, "", ErrContentType},
		{"duplicate keys", "/dup", "/balance", nil, 0, "", ErrResponse},
		{"inexact number", "/inexact", "/balance", nil, 0, "", ErrResponse},
		{"too large", "/big", "/balance", nil, 0, "", ErrResponse},
		{"pointer nowhere", "/balance?account={{account}}", "/missing", acct, 0, "", ErrPointer},
		{"pointer into scalar", "/balance?account={{account}}", "/balance/x", acct, 0, "", ErrPointer},
		{"bad index", "/balance?account={{account}}", "/tags/01", acct, 0, "", ErrPointer},
		{"timeout", "/slow", "", nil, 50 * time.Millisecond, "", ErrUnavailable},
		{"refused", closedURL + "/balance", "", nil, 0, "", ErrUnavailable},
		{"not http", "file:///etc/passwd", "", nil, 0, "", ErrDeclaration},
	}
	var observed atomic.Int64
	m := New(Options{Observe: func(via string, _ time.Duration, _ error) {
		if via == "http" {
			observed.Add(1)
		}
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.url
			if strings.HasPrefix(u, "/") {
				u = srv.URL + u
			}
			ms := httpM(u, tt.pointer)
			ms.Timeout = tt.timeout
			v, err := m.Measure(context.Background(), ms, tt.inputs)
			if tt.kind != nil {
				var me *Error
				if !errors.Is(err, tt.kind) || !errors.As(err, &me) || me.Name != "balance" || me.Via != "http" {
					t.Fatalf("err = %v, want kind %v", err, tt.kind)
				}
				if strings.Contains(err.Error(), "1102534471") || strings.Contains(err.Error(), "account=") {
					t.Fatalf("error text carries the URL or an argument value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(v)
			if string(got) != tt.want {
				t.Fatalf("value %s, want %s", got, tt.want)
			}
			if n, ok := v.(json.Number); ok && n.String() != tt.want {
				t.Fatalf("number text %s", n)
			}
		})
	}
	if observed.Load() != int64(len(tests)) {
		t.Errorf("observed %d measurements, want %d", observed.Load(), len(tests))
	}
}

// MCP measurements call a real server process and read structuredContent.
func TestMCP(t *testing.T) {
	client := bankClient(t)
	dial := func(_ context.Context, server string) (*upstream.Client, error) {
		if server != "bank" {
			return nil, fmt.Errorf("unknown server %q", server)
		}
		return client, nil
	}
	m := New(Options{MCP: dial, DefaultTimeout: 20 * time.Second})
	mcpM := func(server, tool string, args map[string]any, pointer string) *policy.Measurement {
		return &policy.Measurement{Name: "balance", MCP: &policy.MCPMeasurement{Server: server, Tool: tool, Args: args, Pointer: pointer}}
	}
	tests := []struct {
		name   string
		ms     *policy.Measurement
		inputs map[string]any
		want   string
		kind   error
	}{
		{"balance", mcpM("bank", "get_balance", map[string]any{"account": "{{from_account}}"}, "/balance"),
			map[string]any{"from_account": "1102534471"}, `2000000`, nil},
		{"whole content", mcpM("bank", "get_balance", map[string]any{"account": "{{from_account}}"}, ""),
			map[string]any{"from_account": "1102534471"}, `{"account":"1102534471","balance":2000000}`, nil},
		{"embedded placeholder", mcpM("bank", "get_balance", map[string]any{"account": "110{{rest}}"}, "/balance"),
			map[string]any{"rest": json.Number("2534471")}, `2000000`, nil},
		{"typed placeholder keeps the type", mcpM("bank", "get_balance", map[string]any{"account": "{{n}}"}, "/balance"),
			map[string]any{"n": json.Number("1102534471")}, "", ErrTool},
		{"unknown account", mcpM("bank", "get_balance", map[string]any{"account": "{{from_account}}"}, "/balance"),
			map[string]any{"from_account": "999"}, "", ErrTool},
		{"missing input", mcpM("bank", "get_balance", map[string]any{"account": "{{from_account}}"}, "/balance"),
			nil, "", ErrInput},
		{"unknown tool", mcpM("bank", "no_such_tool", nil, ""), nil, "", ErrUnavailable},
		{"unknown server", mcpM("elsewhere", "get_balance", nil, ""), nil, "", ErrUnavailable},
		{"pointer nowhere", mcpM("bank", "get_balance", map[string]any{"account": "{{a}}"}, "/limit"),
			map[string]any{"a": "1102534471"}, "", ErrPointer},
		{"refused by the policy", &policy.Measurement{Name: "balance", MCP: &policy.MCPMeasurement{Server: "bank", Tool: "transfer"},
			Err: errors.New("not classified read")}, nil, "", ErrDeclaration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := m.Measure(context.Background(), tt.ms, tt.inputs)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("err = %v, want kind %v", err, tt.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(v)
			if string(got) != tt.want {
				t.Fatalf("value %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := New(Options{}).Measure(context.Background(), mcpM("bank", "get_balance", nil, ""), nil); !errors.Is(err, ErrDeclaration) {
		t.Errorf("MCP without access configured: %v", err)
	}
}

// TestStructuredValue covers what a real server is unlikely to send: a result without captured
// bytes (only the float64 decoding is known), and bytes that disagree with their decoding.
func TestStructuredValue(t *testing.T) {
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		name    string
		decoded string // the MCP client's decoding, as JSON; "" for none
		raw     string // the captured result; "" for none
		want    string // canonical JSON of the value
		kind    error
	}{
		// Without bytes: integers below 2^53 only.
		{"no bytes, integers", `{"a":[1,-9007199254740991,9007199254740991]}`, "", `{"a":[1,-9007199254740991,9007199254740991]}`, nil},
		{"no bytes, fraction", `{"a":2.5}`, "", "", ErrResponse},
		{"no bytes, rounded fraction", `{"a":8.000000000000002}`, "", "", ErrResponse},
		// 2^53 itself is refused: 9007199254740993 decodes to it exactly, so a decoded 2^53
		// may be a neighbour of what the server sent.
		{"no bytes, 2^53", `{"a":9007199254740992}`, "", "", ErrResponse},
		{"no bytes, -2^53", `{"a":-9007199254740992}`, "", "", ErrResponse},
		{"no bytes, 2^55", `{"a":36028797018963968}`, "", "", ErrResponse},
		{"no bytes, none", "", "", "", ErrTool},
		// With bytes: the literal as written, or refused.
		{"bytes", `{"a":2.5}`, `{"content":[],"structuredContent":{"a":2.50}}`, `{"a":2.50}`, nil},
		{"bytes with spaces", `{"a":1}`, ` { "structuredContent" : { "a" : 1 } , "isError" : false } `, `{"a":1}`, nil},
		{"bytes, inexact", `{"a":8.000000000000002}`, `{"structuredContent":{"a":8.000000000000001}}`, "", ErrResponse},
		{"bytes, duplicate name inside", `{"a":2}`, `{"structuredContent":{"a":1,"a":2}}`, "", ErrResponse},
		{"bytes, structuredContent twice", `{"a":2}`, `{"structuredContent":{"a":1},"structuredContent":{"a":2}}`, "", ErrResponse},
		{"bytes, other spelling ignored", `{"a":1}`, `{"StructuredContent":{"a":2},"structuredContent":{"a":1}}`, `{"a":1}`, nil},
		{"bytes of another answer", `{"a":1}`, `{"structuredContent":{"a":2}}`, "", ErrResponse},
		{"bytes with a member the decoding lacks", `{"a":1}`, `{"structuredContent":{"a":1,"b":1}}`, "", ErrResponse},
		{"bytes without structuredContent", `{"a":1}`, `{"content":[]}`, "", ErrResponse},
		{"bytes, null", "", `{"structuredContent":null}`, "", ErrTool},
		{"bytes, absent", "", `{"content":[]}`, "", ErrTool},
		{"bytes, not an object", "", `[]`, "", ErrResponse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var decoded any
			if tt.decoded != "" {
				decoded = decode(tt.decoded)
			}
			var raw json.RawMessage
			if tt.raw != "" {
				raw = json.RawMessage(tt.raw)
			}
			v, err := structuredValue(decoded, raw)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("value %v, err %v, want kind %v", v, err, tt.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(v); string(got) != tt.want {
				t.Fatalf("value %s, want %s", got, tt.want)
			}
		})
	}
}

// meterEnv makes the test binary run newMeterServer over stdio (see TestMain).
const meterEnv = "MEASURE_TEST_METER_SERVER"

// newMeterServer is a real MCP server whose tool "reading" answers with the structuredContent
// {"value": <the text of its argument "n">}, sent verbatim: the text the server sends, not a Go
// value the SDK re-encodes.
func newMeterServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meter", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "reading", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				N string `json:"n"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "reading"}},
				StructuredContent: json.RawMessage(`{"value":` + args.N + `}`),
			}, nil
		})
	return srv
}

// meterClients dials a meter server over stdio (this test binary as a child) and over
// streamable HTTP answering with SSE and with JSON.
func meterClients(t *testing.T) map[string]*upstream.Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]upstream.Config{"stdio": {Command: []string{exe}, Env: map[string]string{meterEnv: "1"}}}
	for name, opts := range map[string]*mcp.StreamableHTTPOptions{"http-sse": nil, "http-json": {JSONResponse: true}} {
		srv := newMeterServer()
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
		t.Cleanup(hs.Close)
		cfgs[name] = upstream.Config{URL: hs.URL}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := map[string]*upstream.Client{}
	for name, cfg := range cfgs {
		c, err := upstream.Dial(ctx, "meter", cfg, upstream.Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[name] = c
	}
	return clients
}

func readingM() *policy.Measurement {
	return &policy.Measurement{Name: "reading", MCP: &policy.MCPMeasurement{Server: "meter", Tool: "reading",
		Args: map[string]any{"n": "{{n}}"}, Pointer: "/value"}}
}

// TestMCPNumbersExact measures numbers a real MCP server sends as text, over stdio and
// streamable HTTP (SSE and JSON). A number is measured as the literal sent, as json.Number, or
// fails as an inexact HTTP reply does (ErrResponse): never settles as a neighbour of what was
// sent. 8.000000000000001 and 0.10000000000000000001, once measured as the doubles
// 8.000000000000002 and 0.1, are refused: no double holds them.
func TestMCPNumbersExact(t *testing.T) {
	for name, client := range meterClients(t) {
		t.Run(name, func(t *testing.T) {
			m := New(Options{MCP: func(context.Context, string) (*upstream.Client, error) { return client, nil },
				DefaultTimeout: 20 * time.Second})
			for _, tt := range []struct {
				sent string
				want string // the json.Number text measured; "" for ErrResponse
			}{
				{"2000000", "2000000"},
				{"2.5", "2.5"},
				{"2.50", "2.50"},
				{"0.1", "0.1"},
				{"1e2", "1e2"},
				{"-0.000001", "-0.000001"},
				{"8.000000000000002", "8.000000000000002"},
				{"9007199254740991", "9007199254740991"},
				{"-9007199254740991", "-9007199254740991"},
				{"9007199254740992", "9007199254740992"},
				{"8.000000000000001", ""},
				{"0.10000000000000000001", ""},
				{"2.0000000000000001", ""},
				{"9007199254740993", ""},
				{"-9007199254740993", ""},
				{"18014398509481985", ""},
				{"1e300", "1e300"},
			} {
				t.Run(tt.sent, func(t *testing.T) {
					v, err := m.Measure(context.Background(), readingM(), map[string]any{"n": tt.sent})
					if tt.want == "" {
						var me *Error
						if !errors.Is(err, ErrResponse) || !errors.As(err, &me) || me.Name != "reading" || me.Via != "mcp" {
							t.Fatalf("sent %s, measured %v (err %v), want an ErrResponse", tt.sent, v, err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if n, ok := v.(json.Number); !ok || n.String() != tt.want {
						t.Fatalf("sent %s, measured %#v, want json.Number %s", tt.sent, v, tt.want)
					}
				})
			}
		})
	}
}

// TestMCPConcurrentMeasurements: measurements in flight together on one connection each settle
// with the number their own call returned.
func TestMCPConcurrentMeasurements(t *testing.T) {
	for name, client := range meterClients(t) {
		t.Run(name, func(t *testing.T) {
			m := New(Options{MCP: func(context.Context, string) (*upstream.Client, error) { return client, nil },
				DefaultTimeout: 20 * time.Second})
			const n = 16
			errs := make(chan error, n)
			for i := range n {
				go func() {
					sent := fmt.Sprintf("%d.%03d", i, i)
					v, err := m.Measure(context.Background(), readingM(), map[string]any{"n": sent})
					if err == nil && v != json.Number(sent) {
						err = fmt.Errorf("sent %s, measured %v", sent, v)
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// FuzzPointer: a pointer finds what referencePointer, a walk written from RFC 6901, finds in the
// same document, and is refused with ErrPointer exactly when the walk finds nothing.
func FuzzPointer(f *testing.F) {
	f.Add(`{"a":{"b":[1,{"c~/":null}]}}`, "/a/b/1/c~0~1")
	f.Add(`[1,2]`, "/01")
	f.Add(`[1,2]`, "/-0")
	f.Add(`[1,2]`, "/1")
	f.Add(`{"":1}`, "/")
	f.Add(`{"~1":1,"/":2}`, "/~01")
	f.Fuzz(func(t *testing.T, doc, pointer string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		want, found := referencePointer(v, pointer)
		got, err := Pointer(v, pointer)
		switch {
		case err != nil && !errors.Is(err, ErrPointer):
			t.Fatalf("error of another kind: %v", err)
		case err != nil && found:
			t.Fatalf("%q in %s: %v, the reference finds %v", pointer, doc, err, want)
		case err == nil && !found:
			t.Fatalf("%q in %s: found %v, the reference nothing", pointer, doc, got)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("%q in %s: found %v, the reference %v", pointer, doc, got, want)
		}
	})
}

// referencePointer evaluates a JSON pointer as RFC 6901 writes it: reference tokens after each
// "/", "~1" read as "/" and "~0" as "~" left to right, and an array index written as "0" or as
// digits without a leading zero. A "~" followed by anything else makes no pointer (§3's grammar).
func referencePointer(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	if pointer[0] != '/' {
		return nil, false
	}
	v := doc
	for _, raw := range strings.Split(pointer[1:], "/") {
		var tok []byte
		for i := 0; i < len(raw); i++ {
			if raw[i] == '~' {
				if i+1 == len(raw) || raw[i+1] != '0' && raw[i+1] != '1' {
					return nil, false
				}
				tok = append(tok, "~/"[raw[i+1]-'0'])
				i++
				continue
			}
			tok = append(tok, raw[i])
		}
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[string(tok)]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			if len(tok) == 0 || len(tok) > 1 && tok[0] == '0' {
				return nil, false
			}
			n := 0
			for _, c := range tok {
				if c < '0' || c > '9' {
					return nil, false
				}
				if n = n*10 + int(c-'0'); n >= len(x) {
					return nil, false
				}
			}
			v = x[n]
		default:
			return nil, false
		}
	}
	return v, true
}

func FuzzFillURL(f *testing.F) {
	f.Add("http://127.0.0.1/x?a={{a}}", "1/2?b=3#4")
	f.Add("http://h/{{a}}/y", "..")
	f.Fuzz(func(t *testing.T, tmpl, val string) {
		out, err := fillURL(tmpl, map[string]any{"a": val})
		if err != nil {
			return
		}
		// A value never adds a path separator, query or fragment the template did not have.
		plain := placeholder.ReplaceAllString(tmpl, "")
		for _, c := range []string{"/", "?", "#", "&"} {
			if strings.Count(out, c) != strings.Count(plain, c) {
				t.Fatalf("value changed the URL shape: %q → %q", tmpl, out)
			}
		}
	})
}
