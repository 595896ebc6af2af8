package upstream

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// eventStream writes a progress notification and then the response to call 7 as an event stream,
// each line ended by lineEnd and each event by blank; the response's data is cut over two lines.
func eventStream(lineEnd, blank string) string {
	lines := []string{
		"event: message",
		`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
		"",
		": a comment",
		"id: 2",
		`data:{"jsonrpc":"2.0","id":7,`,
		`data: "result":{"tools":[{"name":"t","inputSchema":{"maximum":9007199254740993}}]}}`,
	}
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			b.WriteString(blank)
			continue
		}
		b.WriteString(l + lineEnd)
	}
	b.WriteString(blank)
	return b.String()
}

// TestEventReadersAgree: the pass-through's reader of an event stream and the capture of what
// the SDK reads find the same response in a stream, whatever ends its lines and its events,
// and however the network cuts it.
func TestEventReadersAgree(t *testing.T) {
	endings := []string{"\n", "\r\n", "\r\r\n"}
	for _, lineEnd := range endings {
		for _, blank := range append(endings, "\n\r\n", "") {
			body := eventStream(lineEnd, blank)
			if blank == "" {
				body = eventStream(lineEnd, lineEnd+lineEnd)
				body = strings.TrimSuffix(body, lineEnd+lineEnd) // the stream ends without an empty line
			}
			c := &Client{log: slog.New(slog.DiscardHandler)}
			m, err := c.readEvents(strings.NewReader(body), 7, &callRelay{})
			if err != nil || !m.isID(7) || !bytes.Contains(m.Result, []byte("9007199254740993")) {
				t.Fatalf("%q: pass-through read %+v, %v", body, m, err)
			}
			for _, chunk := range []int{1, 5, len(body)} {
				capture := newListCapture()
				capture.sent(mustCall(t, 7))
				b := &captureBody{ReadCloser: ioNopCloser(&chunkReader{data: []byte(body), n: chunk}), sse: true, into: capture}
				var out bytes.Buffer
				if _, err := out.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				raw, err := capture.take()
				if err != nil || !bytes.Equal(raw, m.Result) {
					t.Fatalf("%q in chunks of %d: captured %s, %v; the pass-through read %s", body, chunk, raw, err, m.Result)
				}
			}
		}
	}
}

func TestEventData(t *testing.T) {
	for _, tt := range []struct {
		lines []string
		want  []string // the data of each event, in order
	}{
		{[]string{"data: a\n", "data: b\n", "\n"}, []string{"a\nb"}},
		{[]string{"data:a\r\n", "\r\n", "data:  b\r\r\n", "\r\r\n"}, []string{"a", " b"}},
		{[]string{"data\n", "data: x\n", "\n"}, []string{"\nx"}},
		{[]string{"event: message\n", "\n", ": comment\n", "id: 3\n", "\n"}, nil},
		{[]string{"data\n", "\n"}, nil}, // an empty data line: nothing to decode
		{[]string{"dat: a\n", "datum: b\n", "data : c\n", "\n"}, nil},
	} {
		var e eventData
		var got []string
		for _, l := range tt.lines {
			if data, ok := e.line([]byte(l)); ok {
				got = append(got, string(data))
			}
		}
		if _, ok := e.end(); ok || strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("%q: events %q, want %q", tt.lines, got, tt.want)
		}
	}
}
