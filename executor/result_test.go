package executor

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// sameResultEncoding fails t unless encodeResult writes res as json.Marshal does.
func sameResultEncoding(t interface {
	Helper()
	Fatalf(string, ...any)
}, res *mcp.CallToolResult) {
	t.Helper()
	got, gerr := encodeResult(res)
	want, werr := json.Marshal(res)
	if (gerr == nil) != (werr == nil) || string(got) != string(want) {
		t.Fatalf("encodeResult\n got %s (%v)\nwant %s (%v)", got, gerr, want, werr)
	}
}

func TestEncodeResultIsJSONMarshal(t *testing.T) {
	odd := "ok <b>&</b> \u2028 \u2029 é \x00 \x1f \"q\" \\ \xff\xfe 😀"
	tests := []*mcp.CallToolResult{
		{},
		{Content: []mcp.Content{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: `{"balance":1000}`}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: odd}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "", Meta: mcp.Meta{"k<": odd}, Annotations: &mcp.Annotations{Priority: 0.5}}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte(odd), MIMEType: "image/png"}, &mcp.AudioContent{Data: []byte{1, 2}, MIMEType: "audio/wav"}}},
		{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a&b", MIMEType: "text/plain", Text: odd}}}},
		{Content: []mcp.Content{&mcp.ResourceLink{URI: "https://x/<y>", Name: "y"}}},
		{StructuredContent: map[string]any{"z": 1.5, "a": []any{nil, true, odd}, "n": json.Number("123456789012345678901234567890")}},
		{StructuredContent: json.RawMessage(" { \"b\" : [ 1 , 2 ] , \"a\" : \"<&>\" } ")},
		{StructuredContent: 12},
		{Meta: mcp.Meta{"progressToken": "t", "x": map[string]any{"y": odd}}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}},
	}
	for _, res := range tests {
		sameResultEncoding(t, res)
	}
}

func TestEncodeResultIsJSONMarshalRapid(t *testing.T) {
	str := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune("<>&\u2028\u2029\"\\\x00\x7f\u00e9"))),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) }))
	rapid.Check(t, func(rt *rapid.T) {
		res := &mcp.CallToolResult{IsError: rapid.Bool().Draw(rt, "isError")}
		for range rapid.IntRange(0, 3).Draw(rt, "contents") {
			c := &mcp.TextContent{Text: str.Draw(rt, "text")}
			if rapid.Bool().Draw(rt, "meta") {
				c.Meta = mcp.Meta{str.Draw(rt, "key"): str.Draw(rt, "value")}
			}
			res.Content = append(res.Content, c)
		}
		if rapid.Bool().Draw(rt, "structured") {
			res.StructuredContent = map[string]any{str.Draw(rt, "skey"): []any{str.Draw(rt, "sval"), rapid.Float64().Draw(rt, "num")}}
		}
		sameResultEncoding(rt, res)
	})
}

func BenchmarkEncodeResult(b *testing.B) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"account":"1102534471","balance":1000000}`}}}
	b.Run("encodeResult", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeResult(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
