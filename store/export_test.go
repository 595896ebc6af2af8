package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
)

func compact(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFieldMask(t *testing.T) {
	record := `{"record_id":"rec_1","verdict":"eyJ.x.y","verdict_id":"jti_1",
		"call_arguments":{"amount":500000,"to":{"acct":"110-222"}},
		"slots":[{"slot_id":"amount","value":500000},{"slot_id":"to","value":null},
		         {"slot_id":"memo","value":"<rent & co>"}],
		"nested":{"deep":[{"verdict":{"a":1}}]},"big":12345678901234567890}`
	for _, tc := range []struct {
		rules []string
		want  string
	}{
		{nil, `{"big":12345678901234567890,"call_arguments":{"amount":500000,"to":{"acct":"110-222"}},"nested":{"deep":[{"verdict":{"a":1}}]},"record_id":"rec_1","slots":[{"slot_id":"amount","value":500000},{"slot_id":"to","value":null},{"slot_id":"memo","value":"<rent & co>"}],"verdict":"eyJ.x.y","verdict_id":"jti_1"}`},
		{[]string{"verdict"}, `{"big":12345678901234567890,"call_arguments":{"amount":500000,"to":{"acct":"110-222"}},"nested":{"deep":[{"verdict":"***"}]},"record_id":"rec_1","slots":[{"slot_id":"amount","value":500000},{"slot_id":"to","value":null},{"slot_id":"memo","value":"<rent & co>"}],"verdict":"***","verdict_id":"jti_1"}`},
		{[]string{"/call_arguments/*", "/slots/*/value"}, `{"big":12345678901234567890,"call_arguments":{"amount":"***","to":"***"},"nested":{"deep":[{"verdict":{"a":1}}]},"record_id":"rec_1","slots":[{"slot_id":"amount","value":"***"},{"slot_id":"to","value":null},{"slot_id":"memo","value":"***"}],"verdict":"eyJ.x.y","verdict_id":"jti_1"}`},
		{[]string{"/call_arguments", "/slots/1"}, `{"big":12345678901234567890,"call_arguments":"***","nested":{"deep":[{"verdict":{"a":1}}]},"record_id":"rec_1","slots":[{"slot_id":"amount","value":500000},"***",{"slot_id":"memo","value":"<rent & co>"}],"verdict":"eyJ.x.y","verdict_id":"jti_1"}`},
	} {
		m, err := NewFieldMask(tc.rules...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Mask([]byte(record))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("rules %q:\n got %s\nwant %s", tc.rules, got, tc.want)
		}
	}
	for _, bad := range []string{"", "/", "/a//b", "/a/", "/a~", "/a~2b"} {
		if _, err := NewFieldMask(bad); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
	m, _ := NewFieldMask("/a~1b/c~0d")
	if got, _ := m.Mask([]byte(`{"a/b":{"c~d":1,"c":2}}`)); string(got) != `{"a/b":{"c":2,"c~d":"***"}}` {
		t.Errorf("escaped path: %s", got)
	}
}

// A masked export of both record kinds reads back with the values gone and the rest intact.
func TestExportRoundTrip(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	d, ex := db.Decisions(), db.Executions()
	appendDecision(t, d, "rec_1", "k1", "ask_user", "", t0)
	appendDecision(t, d, "rec_2", "k1", "verdict_issued", "jti_1", t0.Add(time.Second))
	appendDecision(t, d, "rec_3", "k2", "hold", "", t0.Add(2*time.Second))
	x := newExecution("jti_1", t0.Add(2*time.Second))
	if err := ex.Start(ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Finish(ctx, x.RecordID, api.ExecutionExecuted, "", "sha256:cd", t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	if _, err := d.ExportJSONLCount(ctx, &buf, t0.Add(time.Second), DefaultMask()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "110-222-333") || strings.Contains(buf.String(), "500000") {
		t.Fatalf("masked export leaks values:\n%s", buf.String())
	}
	var got []DecisionMeta
	if err := ReadDecisions(&buf, func(r *Decision) error {
		got = append(got, r.DecisionMeta)
		var rec struct {
			CallArguments map[string]string `json:"call_arguments"`
		}
		if err := json.Unmarshal(r.Record, &rec); err != nil {
			return err
		}
		if rec.CallArguments["amount"] != Masked || rec.CallArguments["to_account"] != Masked {
			t.Errorf("call_arguments not masked: %s", r.Record)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []DecisionMeta{
		{RecordID: "rec_2", ActionKey: "k1", Outcome: "verdict_issued", VerdictID: "jti_1", Time: t0.Add(time.Second)},
		{RecordID: "rec_3", ActionKey: "k2", Outcome: "hold", Time: t0.Add(2 * time.Second)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions read back:\n got %+v\nwant %+v", got, want)
	}

	buf.Reset()
	if _, err := ex.ExportJSONLCount(ctx, &buf, time.Time{}, DefaultMask()); err != nil {
		t.Fatal(err)
	}
	var execs []*api.ExecutionRecord
	if err := ReadExecutions(&buf, func(x *api.ExecutionRecord) error { execs = append(execs, x); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(execs) != 1 || execs[0].Verdict != Masked || execs[0].VerdictID != "jti_1" ||
		execs[0].Decision != api.ExecutionExecuted || execs[0].ArgumentsDigest != "sha256:ab" {
		t.Fatalf("executions read back: %+v", execs)
	}

	// Unmasked, the export is the stored records byte for byte.
	buf.Reset()
	if _, err := d.ExportJSONLCount(ctx, &buf, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	if !bytes.Equal(first, compact(t, decisionJSON("rec_1", "k1", "ask_user", "", t0))) {
		t.Fatalf("unmasked export: %s", first)
	}
}

func TestReadJSONL(t *testing.T) {
	long := `{"a":"` + strings.Repeat("x", 200<<10) + `"}`
	for _, tc := range []struct {
		name, in string
		lines    int
		errLine  int
	}{
		{"empty", "", 0, 0},
		{"blank lines and CRLF", "\n{\"a\":1}\r\n\n  \n{\"b\":2}", 2, 0},
		{"no final newline", `{"a":1}`, 1, 0},
		{"long line", long + "\n" + long, 2, 0},
		{"array", "{}\n[1]\n", 0, 2},
		{"two values on a line", "{} {}\n", 0, 1},
		{"truncated", "{}\n{\"a\":", 0, 2},
	} {
		n := 0
		err := ReadJSONL(strings.NewReader(tc.in), func([]byte) error { n++; return nil })
		var le *LineError
		switch {
		case tc.errLine == 0 && (err != nil || n != tc.lines):
			t.Errorf("%s: %d lines, %v", tc.name, n, err)
		case tc.errLine != 0 && (!errors.As(err, &le) || le.Line != tc.errLine):
			t.Errorf("%s: got %v, want an error on line %d", tc.name, err, tc.errLine)
		}
	}
	tooLong := `{"a":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	if err := ReadJSONL(strings.NewReader(tooLong), func([]byte) error { return nil }); err == nil {
		t.Error("a line over MaxLineBytes was accepted")
	}
}

// FuzzReadJSONL: any input either reads or fails with an error, and every line handed out is
// valid JSON that the typed readers then accept or refuse without panicking.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte("{\"record_id\":\"r\",\"actor\":\"executor\",\"execution_decision\":\"executed\"}\n"))
	f.Add([]byte("{\"record_id\":\"r\",\"outcome\":\"hold\",\"timestamp\":\"2026-11-30T09:12:03Z\"}\r\n\n{}"))
	f.Add([]byte("{\"a\":[1,2,{\"b\":null}]}\n[]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		err := ReadJSONL(bytes.NewReader(in), func(line []byte) error {
			if !json.Valid(line) {
				t.Fatalf("invalid JSON handed out: %q", line)
			}
			return nil
		})
		var le *LineError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("error of unexpected type: %v", err)
		}
		_ = ReadExecutions(bytes.NewReader(in), func(x *api.ExecutionRecord) error {
			if x.RecordID == "" {
				t.Fatal("execution without record id accepted")
			}
			return nil
		})
		_ = ReadDecisions(bytes.NewReader(in), func(d *Decision) error {
			if d.RecordID == "" {
				t.Fatal("decision without record id accepted")
			}
			return nil
		})
	})
}

// ExportJSONLCount counts exactly the lines it writes, for both record kinds.
func TestExportJSONLCount(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	d, ex := db.Decisions(), db.Executions()
	for i := range 5 {
		appendDecision(t, d, fmt.Sprintf("rec_%d", i), "k1", "ask_user", "", t0.Add(time.Duration(i)*time.Second))
		x := newExecution(fmt.Sprintf("jti_%d", i), t0.Add(time.Duration(i)*time.Second))
		if err := ex.Start(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		export func(w io.Writer) (int, error)
		want   int
	}{
		{"decisions", func(w io.Writer) (int, error) { return d.ExportJSONLCount(ctx, w, t0, nil) }, 5},
		{"decisions since", func(w io.Writer) (int, error) {
			return d.ExportJSONLCount(ctx, w, t0.Add(3*time.Second), DefaultMask())
		}, 2},
		{"executions", func(w io.Writer) (int, error) { return ex.ExportJSONLCount(ctx, w, time.Time{}, DefaultMask()) }, 5},
		{"executions since", func(w io.Writer) (int, error) { return ex.ExportJSONLCount(ctx, w, t0.Add(time.Hour), nil) }, 0},
	} {
		var buf bytes.Buffer
		n, err := tc.export(&buf)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lines := 0
		if err := ReadJSONL(&buf, func([]byte) error { lines++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != tc.want || lines != n {
			t.Errorf("%s: count %d, %d lines, want %d", tc.name, n, lines, tc.want)
		}
	}
}

// exportLines is what the ServeExport tests' exports write: two records.
const exportLines = "{\"record_id\":\"rec_1\"}\n{\"record_id\":\"rec_2\"}\n"

// TestServeExport runs ServeExport in real net/http servers, over HTTP/1.1 and HTTP/2, and
// reads the responses with a real client.
func TestServeExport(t *testing.T) {
	errStore := errors.New("store failed")
	tests := []struct {
		name   string
		export func(w io.Writer) (int, error)
		// status is the response's; body is what the client reads before the response ends;
		// broken says that the response ends abnormally.
		status  int
		body    string
		broken  bool
		trailer bool
	}{
		{
			name:   "every record written",
			export: func(w io.Writer) (int, error) { _, err := io.WriteString(w, exportLines); return 2, err },
			status: http.StatusOK, body: exportLines, trailer: true,
		},
		{
			name:   "no record",
			export: func(io.Writer) (int, error) { return 0, nil },
			status: http.StatusOK, trailer: true,
		},
		{
			name:   "failed before its first byte",
			export: func(io.Writer) (int, error) { return 0, errStore },
			status: http.StatusInternalServerError, body: `{"error":"store failed"}`,
		},
		{
			name: "failed after a complete line",
			export: func(w io.Writer) (int, error) {
				_, err := io.WriteString(w, exportLines)
				return 2, errors.Join(err, errStore)
			},
			status: http.StatusOK, broken: true,
		},
	}
	for _, proto := range []struct {
		name  string
		http2 bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		for _, tc := range tests {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				type result struct {
					started bool
					err     error
				}
				results := make(chan result, 1)
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/x-ndjson")
					started, served := ServeExport(w, func(out io.Writer) (int, error) {
						return tc.export(flushWriter{out, w.(http.Flusher)})
					})
					results <- result{started, served}
					switch {
					case served == nil:
					case !started:
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusInternalServerError)
						fmt.Fprintf(w, `{"error":%q}`, served.Error())
					default:
						panic(http.ErrAbortHandler)
					}
				}))
				srv.EnableHTTP2 = proto.http2
				if proto.http2 {
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()

				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, readErr := io.ReadAll(resp.Body)
				if wantProto := map[bool]int{false: 1, true: 2}[proto.http2]; resp.ProtoMajor != wantProto {
					t.Errorf("response over %s", resp.Proto)
				}
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if (readErr != nil) != tc.broken {
					t.Errorf("reading the body: %v, want an abnormal end: %t", readErr, tc.broken)
				}
				if !tc.broken && string(body) != tc.body {
					t.Errorf("body %q, want %q", body, tc.body)
				}
				checked := api.CheckExportTrailer(resp.Trailer, strings.Count(string(body), "\n"))
				if tc.trailer != (checked == nil) {
					t.Errorf("trailer %v: %v", resp.Trailer, checked)
				}
				if !tc.trailer && !errors.Is(checked, api.ErrExportIncomplete) {
					t.Errorf("CheckExportTrailer = %v, want api.ErrExportIncomplete", checked)
				}
				if tc.status != http.StatusOK && resp.Header.Get("Trailer") != "" {
					t.Errorf("an error response declares trailers: %v", resp.Header)
				}
				if tc.trailer && !proto.http2 && (len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked") {
					t.Errorf("a small export went out as %v, not chunked: its trailers could not follow", resp.TransferEncoding)
				}
				if res := <-results; (res.err == nil) != tc.trailer || res.started != (tc.trailer || tc.broken) {
					t.Errorf("ServeExport = %t, %v", res.started, res.err)
				}
			})
		}
	}
}

// flushWriter pushes every write to the client, as a long export's writes reach it.
type flushWriter struct {
	w io.Writer
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	fw.f.Flush()
	return n, err
}
