package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallChoosesItsWay: what a ToolCall asks decides how it is sent, to a
// server plain calls can be made to: plainly only with the tool's
// definition and nothing only the SDK's path gives (a retry's answers and
// state, the result's bytes), which then reach the server; a call asking
// for what no way gives is refused before anything is sent.
func TestCallChoosesItsWay(t *testing.T) {
	c, ledger, defs := dialPlain(t, plainServer(), &mcp.StreamableHTTPOptions{Stateless: true})
	if c.plain.Load() == nil {
		t.Fatal("no plain calls to the server")
	}
	answers := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "red"}}}
	for _, tc := range []struct {
		name string
		call ToolCall
		// sent is "" for nothing sent, else "plain" or "sdk".
		sent string
		kind error
		raw  bool // result bytes returned
	}{
		{"with the definition", ToolCall{Tool: "text", Definition: defs["text"].Raw}, "plain", nil, false},
		{"pass-through", ToolCall{Tool: "text", Definition: defs["text"].Raw, PassThrough: true}, "plain", nil, false},
		{"without the definition", ToolCall{Tool: "text"}, "sdk", nil, false},
		{"pass-through without the definition", ToolCall{Tool: "text", PassThrough: true}, "sdk", nil, false},
		{"raw", ToolCall{Tool: "structured", Raw: true}, "sdk", nil, true},
		{"raw with the definition", ToolCall{Tool: "structured", Definition: defs["structured"].Raw, Raw: true}, "sdk", nil, true},
		{"retry with the definition", ToolCall{Tool: "asking", Definition: defs["asking"].Raw, Answers: answers, State: "st-1"},
			"sdk", ErrInputRequired, false},
		{"retry without state", ToolCall{Tool: "asking", Definition: defs["asking"].Raw, Answers: answers}, "sdk", ErrInputRequired, false},
		{"retry without answers", ToolCall{Tool: "asking", Definition: defs["asking"].Raw, State: "st-1"}, "sdk", ErrInputRequired, false},
		{"raw pass-through", ToolCall{Tool: "text", Definition: defs["text"].Raw, PassThrough: true, Raw: true}, "", ErrRejected, false},
		{"raw pass-through without the definition", ToolCall{Tool: "text", PassThrough: true, Raw: true}, "", ErrRejected, false},
		{"arguments not an object, plain", ToolCall{Tool: "text", Definition: defs["text"].Raw, Args: json.RawMessage(`[1]`)},
			"", ErrRejected, false},
		{"arguments not an object, sdk", ToolCall{Tool: "text", Args: json.RawMessage(`[1]`)}, "", ErrRejected, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ledger.count()
			res, raw, err := c.Call(testContext(t), tc.call)
			if kindOf(err) != kindOf(tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			if ce := (*CallError)(nil); err != nil && (!errors.As(err, &ce) || ce.Server != "plain" || ce.Tool != tc.call.Tool) {
				t.Fatalf("error %#v, want a *CallError naming the server and the tool", err)
			}
			if (raw != nil) != tc.raw {
				t.Fatalf("result bytes %q, want them: %v", raw, tc.raw)
			}
			if tc.raw && !bytes.Contains(raw, []byte(`9007199254740993`)) {
				t.Fatalf("result bytes %s, want the server's", raw)
			}
			if err == nil && res == nil {
				t.Fatal("no result")
			}
			switch sent := ledger.count() - n; {
			case tc.sent == "" && sent != 0:
				t.Fatalf("%d requests sent, want none", sent)
			case tc.sent == "":
				return
			case sent != 1:
				t.Fatalf("%d requests sent, want 1", sent)
			}
			got := ledger.at(n)
			if got.plain != (tc.sent == "plain") {
				t.Fatalf("sent plainly = %v, want %v", got.plain, tc.sent == "plain")
			}
			if got.state != tc.call.State {
				t.Fatalf("requestState %q sent, want %q", got.state, tc.call.State)
			}
			if want := len(tc.call.Answers) > 0; (got.answers != "") != want {
				t.Fatalf("inputResponses %s sent, want them: %v", got.answers, want)
			}
		})
	}
}
