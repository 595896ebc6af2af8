package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/verdictgate/verdict/canonical"
)

func TestParseTool(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string // canonical code or substring; "" means usable
	}{
		{"plain", `{"name":"t","description":"d","inputSchema":{"type":"object"}}`, ""},
		{"no description", `{"name":"t","inputSchema":{"type":"object"}}`, ""},
		{"no schema", `{"name":"t"}`, ""},
		{"duplicate key in schema", `{"name":"t","inputSchema":{"type":"object","type":"string"}}`, canonical.CodeDuplicateKey},
		{"duplicate name key", `{"name":"t","name":"u"}`, canonical.CodeDuplicateKey},
		{"inexact number", `{"name":"t","inputSchema":{"type":"object","maximum":123456789012345678}}`, canonical.CodeNumberNotExact},
		{"lone surrogate", `{"name":"t","description":"\ud800"}`, canonical.CodeLoneSurrogate},
		{"invalid utf-8", "{\"name\":\"t\",\"description\":\"\xff\"}", canonical.CodeInvalidUTF8},
		{"name not a string", `{"name":5}`, "name must be"},
		{"empty name", `{"name":""}`, "name must be"},
		{"missing name", `{"description":"d"}`, "name must be"},
		{"description not a string", `{"name":"t","description":["d"]}`, "description must be"},
		{"not an object", `["t"]`, "tool definition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := parseTool("s", json.RawMessage(tt.raw))
			if tt.wantErr == "" {
				if tl.Err != nil || !strings.HasPrefix(tl.Digest, "sha256:") {
					t.Fatalf("digest %q, err %v", tl.Digest, tl.Err)
				}
				return
			}
			if tl.Err == nil || tl.Digest != "" {
				t.Fatalf("accepted with digest %q", tl.Digest)
			}
			if !canonical.IsCode(tl.Err, tt.wantErr) && !strings.Contains(tl.Err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %s", tl.Err, tt.wantErr)
			}
		})
	}
}

func TestDefinitionDigest(t *testing.T) {
	d := func(name, desc, schema string) string {
		t.Helper()
		got, err := DefinitionDigest(name, desc, json.RawMessage(schema))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Pinned: the digest is over exactly these three members, canonicalized.
	want, _ := canonical.DigestJSON([]byte(`{"name":"t","description":"d","inputSchema":{"required":[],"type":"object"}}`))
	if got := d("t", "d", `{ "type": "object", "required": [] }`); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
	if d("t", "", "") == d("t", "", `{"type":"object"}`) {
		t.Error("a tool without a schema digests like one with an empty schema")
	}
	if d("t", "", "") != d("t", "", "null") {
		t.Error("absent and null schemas differ")
	}
	if d("t", "d", `{"type":"object"}`) == d("t", "d2", `{"type":"object"}`) {
		t.Error("description not covered")
	}
	if d("t", "", `{"maximum":1.0}`) != d("t", "", `{"maximum":1}`) {
		t.Error("equal numbers digest apart")
	}
	if _, err := DefinitionDigest("t", "", json.RawMessage(`{"maximum":9007199254740993}`)); !canonical.IsCode(err, canonical.CodeNumberNotExact) {
		t.Errorf("inexact number: %v", err)
	}
}

// A saved listing is read as a live one: in order, every copy of a name given twice unusable.
func TestDuplicateToolNames(t *testing.T) {
	tools := ParseTools("s", []json.RawMessage{[]byte(`{"name":"a"}`), []byte(`{"name":"b"}`), []byte(`{"name":"a","description":"x"}`)})
	if len(tools) != 3 || tools[0].Err == nil || tools[2].Err == nil || tools[0].Digest != "" || tools[1].Err != nil ||
		tools[1].Name != "b" || tools[1].Server != "s" {
		t.Errorf("duplicates: %+v", tools)
	}
}

func FuzzParseTool(f *testing.F) {
	f.Add([]byte(`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"integer"}}}}`))
	f.Add([]byte(`{"name":"t","inputSchema":{"maximum":1e400}}`))
	f.Add([]byte(`{"name":"t","description":"\ud83d\ude00"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tl := parseTool("s", raw)
		if tl.Err != nil {
			if tl.Digest != "" {
				t.Fatal("digest alongside an error")
			}
			return
		}
		if tl.Name == "" {
			t.Fatal("usable tool without a name")
		}
		again, err := DefinitionDigest(tl.Name, tl.Description, tl.InputSchema)
		if err != nil || again != tl.Digest {
			t.Fatalf("digest not reproducible: %v", err)
		}
		if err := canonical.Validate(raw); err != nil {
			t.Fatalf("usable tool from a definition without a canonical form: %v", err)
		}
	})
}

// sseResponse is a tools/list answer as an event stream, the way the SDK
// server writes it, with a result the SDK's decoded view would round.
const sseResponse = "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"maximum\":9007199254740993}}]}}\r\n\r\n"

func TestCaptureBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		sse  bool
		body string
	}{
		{"sse crlf", true, sseResponse},
		{"sse lf, no final blank line", true, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\n" +
			"data: \"result\":{\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"maximum\":9007199254740993}}]}}"},
		{"json", false, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"t","inputSchema":{"maximum":9007199254740993}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 4096} {
				capture := newListCapture()
				capture.sent(mustCall(t, 7))
				b := &captureBody{ReadCloser: ioNopCloser(&chunkReader{data: []byte(tc.body), n: chunk}), sse: tc.sse, into: capture}
				var out bytes.Buffer
				if _, err := out.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				if out.String() != tc.body {
					t.Fatal("body altered in passing")
				}
				raw, err := capture.take()
				if err != nil {
					t.Fatalf("chunk %d: %v", chunk, err)
				}
				if !strings.Contains(string(raw), "9007199254740993") {
					t.Fatalf("chunk %d: captured %s", chunk, raw)
				}
			}
		})
	}
}

// FuzzCaptureBody: a body passes through unaltered, and what is captured of it does not depend
// on how the network cuts it. A JSON body that encoding/json reads as exactly the response to the
// pending call ({"jsonrpc":"2.0","id":7,"result":...}) is captured, with the result's bytes as
// written; whatever a JSON body yields is JSON written in it.
func FuzzCaptureBody(f *testing.F) {
	f.Add([]byte(sseResponse), true, uint8(3))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), false, uint8(1))
	f.Add([]byte(` {"result": {"tools":[{"maximum":9007199254740993}]} , "id":7.0,"jsonrpc":"2.0"}`), false, uint8(2))
	f.Add([]byte(`{"jsonrpc":"2.0","id":8,"result":{}}`), false, uint8(5))
	f.Fuzz(func(t *testing.T, body []byte, sse bool, chunk uint8) {
		take := func(n int) (json.RawMessage, error) {
			capture := newListCapture()
			capture.sent(mustCall(t, 7))
			b := &captureBody{ReadCloser: ioNopCloser(&chunkReader{data: body, n: n}), sse: sse, into: capture}
			var out bytes.Buffer
			if _, err := out.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), body) {
				t.Fatal("body altered in passing")
			}
			return capture.take()
		}
		got, err := take(int(chunk) + 1)
		whole, werr := take(len(body) + 1)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, whole) {
			t.Fatalf("in chunks of %d: %s, %v; whole: %s, %v", int(chunk)+1, got, err, whole, werr)
		}
		if sse {
			return
		}
		if err == nil && (!json.Valid(got) || !bytes.Contains(body, got)) {
			t.Fatalf("captured %q, which is not JSON written in the body", got)
		}
		if want, ok := responseTo7(body); ok && (err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("%q: captured %s, %v; want %s", body, got, err, want)
		}
	})
}

// responseTo7 reads body with encoding/json as a JSON-RPC response to the call with id 7 and
// returns its result: exactly the members jsonrpc ("2.0"), id (7) and result (not null), each
// named once, in lower case.
func responseTo7(body []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		var v json.RawMessage
		if err != nil || dec.Decode(&v) != nil || m[name] != nil {
			return nil, false
		}
		m[name] = v
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	var version string
	var id float64
	if len(m) != 3 || json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" ||
		json.Unmarshal(m["id"], &id) != nil || id != 7 || m["result"] == nil || string(m["result"]) == "null" {
		return nil, false
	}
	return m["result"], true
}

// TestHeadersReachServer checks configured headers on every request and
// that reserved ones cannot be configured.
func TestHeadersReachServer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	if _, err := Dial(testContext(t), "probe", Config{URL: hs.URL}, testOptions(t)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("without the header: %v", err)
	}
	c, err := Dial(testContext(t), "probe", Config{URL: hs.URL, Headers: map[string]string{"authorization": "Bearer s3cret"}}, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tools, err := c.Tools(testContext(t)); err != nil || len(tools) != 1 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	if _, err := callTool(testContext(t), c, "probe", nil); err != nil {
		t.Fatal(err)
	}
}

// TestLegacyStatefulServer covers a server that speaks only the older
// protocol revisions with sessions: listing and calls work, and an input
// request arrives as an elicitation the client refuses, so the call is
// rejected after exactly one arrival.
func TestLegacyStatefulServer(t *testing.T) {
	b := httpBank(t, "--stateful", "--input-required")
	c := dial(t, b)
	tools := listTools(t, c)
	if tools["transfer"].Err != nil || tools["transfer"].Digest == "" {
		t.Fatalf("transfer: %+v", tools["transfer"])
	}
	if _, err := callTool(testContext(t), c, "get_balance", json.RawMessage(`{"account":"1102534471"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := callTool(testContext(t), c, "transfer", json.RawMessage(`{"from_account":"1102534471","to_account":"110-222-333","amount":5}`))
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err %v, want ErrRejected", err)
	}
	if n := len(b.callsTo(t, "transfer")); n != 1 {
		t.Errorf("transfer arrived %d times", n)
	}
}

// A capture matches a response to its request by id type and value: the answer to request
// "7" is not the answer to request 7.
func TestListCaptureMatchesIDTypes(t *testing.T) {
	c := newListCapture()
	req, err := jsonrpc.MakeID(float64(7)) // as JSON decodes a number id: held as int64
	if err != nil {
		t.Fatal(err)
	}
	c.sent(&jsonrpc.Request{ID: req, Method: methodListTools})
	other, err := jsonrpc.MakeID("7")
	if err != nil {
		t.Fatal(err)
	}
	c.received(&jsonrpc.Response{ID: other, Result: json.RawMessage(`{"tools":[]}`)})
	if _, err := c.take(); err == nil {
		t.Fatal("the answer to id \"7\" was taken as the answer to id 7")
	}
	c.received(&jsonrpc.Response{ID: req, Result: json.RawMessage(`{"tools":[{"name":"a"}]}`)})
	if got, err := c.take(); err != nil || string(got) != `{"tools":[{"name":"a"}]}` {
		t.Fatalf("take = %s, %v", got, err)
	}
}
