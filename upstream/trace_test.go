package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/conntest"
)

// withSlot returns ctx carrying the trace of a tools/call whose result's
// bytes go to s.
func withSlot(ctx context.Context, s *rawSlot) context.Context {
	return withTrace(ctx, &requestTrace{method: methodCallTool, slot: s})
}

// lostTrace is the SDK's call of tools/call made under a context of its
// own, as if something between the caller and the transports made the
// request's context afresh: the request's trace does not reach them.
func lostTrace(fresh context.Context) func(*mcp.ClientSession, context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return func(s *mcp.ClientSession, _ context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
		return s.CallTool(fresh, p)
	}
}

// TestTraceLostInTheRoundTripper: a POST whose context does not carry its
// request's trace fills none of what the trace points to. Its result's
// bytes are not bound, it is not watched for its stream's end, and its
// failure to reach a connection is not counted, so the request is not
// taken as unsent.
func TestTraceLostInTheRoundTripper(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(hs.Close)
	refused := errors.New("refused")
	for _, tc := range []struct {
		name string
		kept bool // the POST's context carries the trace
	}{
		{"trace kept", true},
		{"trace lost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			post := func(hc *http.Client, tr *requestTrace) error {
				ctx := testContext(t)
				if tc.kept {
					ctx = withTrace(ctx, tr)
				}
				body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				return resp.Body.Close()
			}

			answered := &http.Transport{}
			t.Cleanup(answered.CloseIdleConnections)
			tr := &requestTrace{method: methodCallTool, slot: &rawSlot{}, send: &sendTrace{}, end: newStreamEnd()}
			if err := post(httpClient(&http.Client{Transport: answered}, nil, newListCapture(), nil, nil), tr); err != nil {
				t.Fatal(err)
			}
			if got, want := string(tr.slot.take()), `{"content":[]}`; tc.kept != (got == want) {
				t.Errorf("result bytes %q", got)
			}
			if tr.end.armed.Load() != tc.kept {
				t.Errorf("stream end watched: %v", tr.end.armed.Load())
			}
			tr.end.wait(context.Background()) // returns: a hang fails the test by its timeout

			// A dial that fails: no connection ever carried the request.
			undialled := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, refused }}
			tr = &requestTrace{method: methodCallTool, send: &sendTrace{}}
			err := post(httpClient(&http.Client{Transport: undialled}, nil, newListCapture(), nil, nil), tr)
			if !errors.Is(err, refused) {
				t.Fatalf("err %v, want the dial's", err)
			}
			if neverSent(err, tr.send) != tc.kept {
				t.Errorf("never sent: %v", neverSent(err, tr.send))
			}
		})
	}
}

// TestRawRequestWithLostTraceHasNoBytes: a request asking for its result's
// bytes whose trace does not reach the transports returns its result with
// nil bytes, on stdio as on HTTP, and files nothing on the connection.
func TestRawRequestWithLostTraceHasNoBytes(t *testing.T) {
	meterTransports(t, func(t *testing.T, c *Client) {
		for _, tc := range []struct {
			name string
			kept bool
			send func(*mcp.ClientSession, context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error)
		}{
			{"trace kept", true, (*mcp.ClientSession).CallTool},
			{"trace lost", false, lostTrace(testContext(t))},
		} {
			params := &mcp.CallToolParams{Name: "reading", Arguments: readingArgs("0.10000000000000000001", "lost", 0)}
			res, raw, err := request(testContext(t), c, methodCallTool, "reading", params, true, nil, tc.send)
			if err != nil || res == nil || res.IsError {
				t.Fatalf("%s: result %+v, err %v", tc.name, res, err)
			}
			if tc.kept && structured(t, raw) != `{"value":0.10000000000000000001,"tag":"lost"}` {
				t.Fatalf("%s: raw %s", tc.name, raw)
			}
			if !tc.kept && raw != nil {
				t.Fatalf("%s: raw %s, want none", tc.name, raw)
			}
			if cn := current(c); cn != nil && cn.stdio != nil && stdioTable(t, c).n.Load() != 0 {
				t.Fatalf("%s: a slot was left in the stdio table", tc.name)
			}
		}
	})
}

// TestRequestWithLostTraceIsNeverUnsent: a request to a server that is
// gone, whose dial is refused, is ErrUnavailable when its trace reaches the
// Transport (nothing was sent), and ErrOutcomeUnknown when it does not:
// with nothing counted, a request is never taken as unsent.
func TestRequestWithLostTraceIsNeverUnsent(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose bool
		want error
	}{
		{"trace kept", false, ErrUnavailable},
		{"trace lost", true, ErrOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := httpBank(t)
			c := dial(t, b)
			ctx := testContext(t)
			args := json.RawMessage(`{"account":"1102534471"}`)
			if _, err := callTool(ctx, c, "get_balance", args); err != nil {
				t.Fatal(err)
			}
			b.stop()
			conntest.WaitDropped(t, strings.TrimSuffix(strings.TrimPrefix(b.cfg.URL, "http://"), "/mcp"))
			send := (*mcp.ClientSession).CallTool
			if tc.lose {
				send = lostTrace(ctx)
			}
			_, _, err := request(ctx, c, methodCallTool, "get_balance", &mcp.CallToolParams{Name: "get_balance", Arguments: args}, false, nil, send)
			other := ErrOutcomeUnknown
			if tc.want == ErrOutcomeUnknown {
				other = ErrUnavailable
			}
			if !errors.Is(err, tc.want) || errors.Is(err, other) {
				t.Fatalf("err %v, want %v alone", err, tc.want)
			}
		})
	}
}

// TestReplayablePostIsNeverUnsent: a POST net/http's Transport may send again after it was
// written (an idempotency key among its headers) is never taken as unsent, even when the last
// connection asked for was not handed over: an earlier attempt may have reached the server.
func TestReplayablePostIsNeverUnsent(t *testing.T) {
	for _, tc := range []struct {
		header string
		unsent bool
	}{
		{"", true},
		{"Idempotency-Key", false},
		{"X-Idempotency-Key", false},
		{"idempotency-key", false},
		{"X-Request-Id", true},
	} {
		t.Run(cmp.Or(tc.header, "none"), func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header[tc.header] = []string{"k1"}
			}
			s := &sendTrace{}
			req = s.attach(req)
			trace := httptrace.ContextClientTrace(req.Context())
			trace.GetConn("127.0.0.1:1") // the first attempt's connection, which was written
			trace.GotConn(httptrace.GotConnInfo{})
			trace.GetConn("127.0.0.1:1") // the Transport's second attempt, whose dial failed
			if got := s.unsent(); got != tc.unsent {
				t.Fatalf("unsent() = %v, want %v", got, tc.unsent)
			}
		})
	}
}
