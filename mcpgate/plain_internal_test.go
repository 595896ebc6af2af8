package mcpgate

import (
	"bytes"
	"encoding/json"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// libraryAnswer is the answer as writePlain builds it through the library's
// encoding of the result and withResultType.
func libraryAnswer(id jsontext.Value, res *mcp.CallToolResult) ([]byte, error) {
	result, err := withResultType(res, false)
	if err != nil {
		return nil, err
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + string(result) + `}`), nil
}

// genValue is a value as a result's structured content or _meta holds it:
// decoded JSON (any, float64, string, bool, nil, maps and slices), with
// strings and names that need escaping, numbers in every range, and values
// that do not encode.
func genValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kind := rapid.IntRange(0, 7).Draw(t, "kind")
		if depth == 0 && kind >= 5 {
			kind = 0
		}
		switch kind {
		case 0:
			return genText().Draw(t, "s")
		case 1:
			return rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1, -1.5, 1e-7, 1e21, 123456789012345678, 1e300, 5e-324, 0.1, 1e20, 1e-6}).Draw(t, "n")
		case 2:
			return rapid.Float64().Draw(t, "f")
		case 3:
			return rapid.SampledFrom([]any{true, false, nil}).Draw(t, "lit")
		case 4:
			if rapid.IntRange(0, 20).Draw(t, "bad") == 0 {
				return math.NaN() // json.Marshal refuses it
			}
			return rapid.Int64().Draw(t, "i")
		case 5:
			return rapid.SliceOfN(genValue(depth-1), 0, 4).Draw(t, "a")
		default:
			return rapid.MapOfN(genText(), genValue(depth-1), 0, 4).Draw(t, "m")
		}
	})
}

func genText() *rapid.Generator[string] {
	return rapid.StringOf(rapid.SampledFrom([]rune("aZ09 <>&'\"\\/\n\r\t\b\f\x00\x1f\x7fé€\u2028\u2029\ufffd😀\U0010ffff")))
}

// The common-shape answer is, byte for byte, the answer built through the
// library's encoding, and it is not used for anything else.
func TestCommonAnswerIsTheLibrarys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := &mcp.CallToolResult{IsError: rapid.Bool().Draw(t, "isError")}
		for _, s := range rapid.SliceOfN(genText(), 0, 3).Draw(t, "texts") {
			res.Content = append(res.Content, &mcp.TextContent{Text: s})
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		if rapid.Bool().Draw(t, "structured") {
			res.StructuredContent = genValue(3).Draw(t, "structuredContent")
		}
		if rapid.Bool().Draw(t, "meta") {
			res.Meta = rapid.MapOfN(genText(), genValue(2), 0, 4).Draw(t, "meta")
		}
		if rapid.Bool().Draw(t, "serverInfo") {
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta[mcp.MetaKeyServerInfo] = gatewayImplementation()
		}
		uncommon := rapid.IntRange(0, 5).Draw(t, "uncommon")
		switch uncommon {
		case 1:
			res.Content = append(res.Content, &mcp.TextContent{Text: "x", Meta: mcp.Meta{"k": "v"}})
		case 2:
			res.Content = append(res.Content, &mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}})
		case 3:
			res.Content = append(res.Content, &mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"})
		case 4:
			res.RequestState = "s"
		}
		id := jsontext.Value(rapid.SampledFrom([]string{"1", "-7", `"a-b.c:d_e"`, "123456789012345"}).Draw(t, "id"))
		want, werr := libraryAnswer(id, res)
		b := answerBuffers.Get().(*answerBuffer)
		defer b.release()
		got, ok := b.commonAnswer(id, res, false)
		switch {
		case uncommon > 0 && uncommon < 5 && ok:
			t.Fatalf("an answer of another shape was encoded as the common one: %s", got)
		case werr != nil && ok:
			t.Fatalf("the library's encoding fails (%v), the common one gave %s", werr, got)
		case ok && !bytes.Equal(got, want):
			t.Fatalf("common answer\n%s\nthe library's\n%s", got, want)
		case !ok && werr == nil && uncommon == 0:
			t.Fatalf("a common result was not encoded: %s", want)
		}
	})
}

// loopbackAddr is isLoopback of the address's string.
func TestLoopbackAddrIsTheLibrarys(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80},
		&net.TCPAddr{IP: net.IPv4(127, 9, 9, 9), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 80},
		&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 80},
		&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 80},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 80, Zone: "lo"},
		&net.TCPAddr{Port: 80},
		&net.TCPAddr{IP: net.IP{1, 2, 3}, Port: 80},
		&net.UnixAddr{Name: "/tmp/s", Net: "unix"},
	} {
		if got, want := loopbackAddr(a), isLoopback(a.String()); got != want {
			t.Errorf("%v: %v, want %v", a, got, want)
		}
	}
}

// streamableAccepts reads Accept values as the library does.
func TestStreamableAcceptsIsTheLibrarys(t *testing.T) {
	library := func(values []string) (jsonOK, streamOK bool) {
		for _, value := range values {
			for _, raw := range strings.Split(value, ",") {
				base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
				switch strings.ToLower(strings.TrimSpace(base)) {
				case "application/json", "application/*":
					jsonOK = true
				case "text/event-stream", "text/*":
					streamOK = true
				case "*/*":
					jsonOK, streamOK = true, true
				}
			}
		}
		return jsonOK, streamOK
	}
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SampledFrom([]string{"application/json", "text/event-stream", "*/*", "text/*", "application/*",
			"Text/Event-Stream", ",", ";q=0.5", " ", "x"})
		var values []string
		for range rapid.IntRange(0, 3).Draw(t, "values") {
			values = append(values, strings.Join(rapid.SliceOfN(parts, 0, 5).Draw(t, "parts"), ""))
		}
		j1, s1 := streamableAccepts(values)
		j2, s2 := library(values)
		if j1 != j2 || s1 != s2 {
			t.Fatalf("%q: %v %v, the library's %v %v", values, j1, s1, j2, s2)
		}
	})
}

// decodePlainCall keeps the revision's _meta members strict, and reads the
// others as the library holds them (encoding/json into any), except those
// the library reads itself or the raw check sets, which leave the request to
// the library.
func TestPlainMetaOthers(t *testing.T) {
	body := func(meta string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`)
	}
	for _, tc := range []struct {
		name, meta string
		served     bool
	}{
		{"none", ``, true},
		{"gate members", `,"io.verdict/instruction":[{"text":"pay <Bob> 1e3","trust":"user","n":12345678901234567890}],"io.verdict/conversation_id":"c1","io.verdict/new_request":true`, true},
		{"another app's member", `,"app/x":{"a":[1,2.5,null,"é"]}`, true},
		{"escaped name", `,"io.verdict/conversation_\u0069d":"c1"`, true},
		{"metaRefused", `,"io.verdict/refused":"meta_invalid"`, false},
		{"metaRefused in capitals", `,"IO.VERDICT/REFUSED":"x"`, false},
		{"log level", `,"io.modelcontextprotocol/logLevel":"debug"`, false},
		{"the MCP namespace in capitals", `,"IO.modelcontextprotocol/x":1`, false},
		{"progress token", `,"progressToken":"p1"`, false},
		{"progress token in capitals", `,"ProgressToken":"p1"`, false},
		{"repeated member", `,"io.verdict/intent":{},"io.verdict/intent":{}`, false},
		{"repeated name inside", `,"io.verdict/intent":{"a":1,"a":2}`, false},
		{"invalid UTF-8", ",\"app/x\":\"\xff\"", false},
		{"lone surrogate", `,"app/x":"\ud800"`, false},
		{"unknown capability member", `,"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{"x":1}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(tc.meta)
			if tc.name == "unknown capability member" {
				b = bytes.Replace(b, []byte(`,"io.modelcontextprotocol/clientCapabilities":{}`), nil, 1)
			}
			c := decodePlainCall(b)
			if (c != nil) != tc.served {
				t.Fatalf("decoded %v, want %v", c != nil, tc.served)
			}
			if c == nil {
				return
			}
			var lib struct {
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if err := json.Unmarshal(b, &lib); err != nil {
				t.Fatal(err)
			}
			want := lib.Params.Meta
			delete(want, mcp.MetaKeyProtocolVersion)
			delete(want, mcp.MetaKeyClientCapabilities)
			if len(want) == 0 {
				want = nil
			}
			if got := map[string]any(c.Params.Meta.Other); !reflect.DeepEqual(got, want) {
				t.Fatalf("other members %#v, want %#v", got, want)
			}
		})
	}
}

// plainTool reads a definition as the library's decoder does: an escape or a
// newline in a description does not keep a tool off the plain path; a member
// named x-mcp-header, however it is spelled, or any doubt, does.
func TestPlainTool(t *testing.T) {
	for _, tc := range []struct {
		def   string
		plain bool
	}{
		{`{"name":"t","inputSchema":{"type":"object"}}`, true},
		{`{"name":"transfer","description":"Send money.\nIrreversible: \"really\" \u00e9","inputSchema":{"type":"object"}}`, true},
		{`{"name":"t","description":"x-mcp-header","inputSchema":{"type":"object","enum":["x-mcp-header"]}}`, true},
		{`{"name":"t","inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`, false},
		{`{"name":"t","inputSchema":{"properties":{"a":{"type":"string","x-mcp-h\u0065ader":"A"}}}}`, false},
		{`{"name":"t","inputSchema":{"properties":{"a":{"type":"string","X-MCP-Header":"A"}}}}`, false},
		{`{"name":"t","inputSchema":{"properties":{"a":{"properties":{"b":{"x-mcp-header":"B"}}}}}}`, false},
		{`{"name":"t","inputSchema":{"items":[{"x-mcp-header":"B"}]}}`, false},
		{`{"name":"t","name":"u"}`, false},
		{"{\"name\":\"\xff\"}", false},
		{`{"name":"t"} {}`, false},
		{`{"name":"t"`, false},
		{``, false},
	} {
		if got := plainTool([]byte(tc.def)); got != tc.plain {
			t.Errorf("plainTool(%s) = %v, want %v", tc.def, got, tc.plain)
		}
	}
}
