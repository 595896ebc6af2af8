package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/jsonptr"
)

// Masked replaces every masked value in an export.
const Masked = "***"

// A Masker rewrites one record (a JSON object) for export. A nil Masker exports records as
// stored.
type Masker interface {
	Mask(record []byte) ([]byte, error)
}

// FieldMask masks values by rule. A rule is either
//
//   - a member name, such as "verdict": that member's value is masked wherever it occurs, at any
//     depth; or
//   - a path starting with "/", in JSON Pointer syntax (RFC 6901, "~1" for "/" and "~0" for
//     "~"), where a segment "*" matches any member or array element: "/call_arguments/*" masks
//     every argument value but keeps the argument names, "/slots/*/value" every slot's value.
//
// A masked value of any type, object and array included, becomes the string "***"; a null
// stays null, since it hides nothing. A masked record's members come out in sorted order.
type FieldMask struct {
	names map[string]bool
	paths [][]string
}

// NewFieldMask compiles rules. An empty rule, or a path rule with an empty segment, is an
// error: it would mask nothing and hide a typo.
func NewFieldMask(rules ...string) (*FieldMask, error) {
	m := &FieldMask{names: map[string]bool{}}
	for _, r := range rules {
		switch {
		case r == "" || r == "/":
			return nil, fmt.Errorf("store: mask rule %q is empty", r)
		case r[0] != '/':
			m.names[r] = true
		default:
			segs, err := jsonptr.Split(r)
			if err != nil {
				return nil, fmt.Errorf("store: mask rule: %w", err)
			}
			if slices.Contains(segs, "") {
				return nil, fmt.Errorf("store: mask rule %q has an empty segment", r)
			}
			m.paths = append(m.paths, segs)
		}
	}
	return m, nil
}

// DefaultMask masks the values a decision or execution record can carry: call arguments
// (names kept), every "value" (slots, rejected candidates, questions, pre-set data), what an
// approval showed, instruction text, invalid-value details, the verdict token, and a record's
// capture whole (the request it was decided from, measured values included).
func DefaultMask() *FieldMask {
	m, err := NewFieldMask("/call_arguments/*", "value", "shown", "text", "detail", "verdict", "capture")
	if err != nil {
		panic(err) // the rules above are constant
	}
	return m
}

// Mask implements Masker.
func (m *FieldMask) Mask(record []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(record))
	dec.UseNumber() // numbers pass through as written
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("store: mask: %w", err)
	}
	v = m.walk(v, make([]string, 0, 8))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("store: mask: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (m *FieldMask) walk(v any, path []string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			p := append(path, k)
			if m.names[k] || m.pathMatch(p) {
				t[k] = masked(child)
			} else {
				t[k] = m.walk(child, p)
			}
		}
	case []any:
		for i, child := range t {
			p := append(path, strconv.Itoa(i))
			if m.pathMatch(p) {
				t[i] = masked(child)
			} else {
				t[i] = m.walk(child, p)
			}
		}
	}
	return v
}

func masked(v any) any {
	if v == nil {
		return nil
	}
	return Masked
}

func (m *FieldMask) pathMatch(path []string) bool {
next:
	for _, rule := range m.paths {
		if len(rule) != len(path) {
			continue
		}
		for i, seg := range rule {
			if seg != "*" && seg != path[i] {
				continue next
			}
		}
		return true
	}
	return false
}

// ExportJSONLCount writes every execution record started at or after since to w, one JSON
// object a line, in time order, each passed through mask when mask is not nil. It returns the
// number of records written, which an HTTP export states in its trailer (see ServeExport); the
// count is only meaningful when the error is nil.
func (s *Executions) ExportJSONLCount(ctx context.Context, w io.Writer, since time.Time, mask Masker) (int, error) {
	return exportJSONL(w, mask, func(line func([]byte) error) error {
		return s.since(ctx, since, func(_ string, val []byte) error { return line(val) })
	})
}

// ExportJSONLCount writes every decision record at or after since to w, one JSON object a
// line, in time order, each passed through mask when mask is not nil. It returns the number of
// records written, as the executions' ExportJSONLCount does.
func (s *Decisions) ExportJSONLCount(ctx context.Context, w io.Writer, since time.Time, mask Masker) (int, error) {
	return exportJSONL(w, mask, func(line func([]byte) error) error {
		return s.Since(ctx, since, func(d *Decision) error { return line(d.Record) })
	})
}

// exportJSONL writes to w, one a line and each passed through mask when mask is not nil, the
// records walk hands to line, and returns how many it wrote.
func exportJSONL(w io.Writer, mask Masker, walk func(line func(record []byte) error) error) (int, error) {
	bw := bufio.NewWriter(w)
	n := 0
	err := walk(func(record []byte) error {
		if err := writeLine(bw, record, mask); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("store: export: %w", err)
	}
	return n, nil
}

// The completion trailers of an HTTP export are api.ExportCompleteTrailer and
// api.ExportRecordsTrailer; a client checks them with api.CheckExportTrailer.

// ServeExport runs export as the body of w, an HTTP response whose status is not yet sent,
// and ends it the way a client can check with api.CheckExportTrailer. export writes the records
// to its writer and returns how many it wrote. The caller sets the other headers (such as
// Content-Type) first.
//
// When export succeeds, ServeExport sets the trailers and returns (true, nil). When it fails,
// no trailer is set and the error is returned with whether any byte of the body had reached
// w: if none had, the status is still unsent and the handler should answer with an error; if
// some had, the handler must end the response abnormally (panic(http.ErrAbortHandler)), so
// that even a client that ignores trailers sees a broken transfer rather than a short
// export.
func ServeExport(w http.ResponseWriter, export func(io.Writer) (int, error)) (started bool, err error) {
	h := w.Header()
	// Declared before the first write: net/http then sends the body chunked (HTTP/1.1) and
	// writes the values set after the body as trailers, also when the whole body would have
	// fitted a Content-Length.
	h.Add("Trailer", api.ExportCompleteTrailer+", "+api.ExportRecordsTrailer)
	body := &sentWriter{w: w}
	n, err := export(body)
	if err != nil {
		if !body.sent {
			h.Del("Trailer")
		}
		return body.sent, err
	}
	h.Set(api.ExportRecordsTrailer, strconv.Itoa(n))
	h.Set(api.ExportCompleteTrailer, "true")
	return true, nil
}

// ServeJSONL answers an HTTP export with ServeExport as a JSONL body that no cache keeps. When
// export fails it logs msg with the error, and answers the error while no byte of the body was
// sent, or else aborts the response, so that no client takes it for a whole, shorter export.
func ServeJSONL(w http.ResponseWriter, log *slog.Logger, msg string, export func(io.Writer) (int, error)) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	started, err := ServeExport(w, export)
	if err == nil {
		return
	}
	log.Warn(msg, "error", err.Error())
	if !started {
		httpx.WriteError(w, err)
		return
	}
	panic(http.ErrAbortHandler)
}

// QuerySince is the since of an HTTP export, ?since=RFC3339: the zero time, every record, when
// it is absent, and a 400 bad_since answer when it is no RFC 3339 time.
func QuerySince(q url.Values) (time.Time, error) {
	v := q.Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, httpx.Errorf(http.StatusBadRequest, api.CodeBadSince, "since must be an RFC 3339 time")
	}
	return t, nil
}

// QueryMask is the mask an HTTP read of records asks for: DefaultMask for ?mask=1 or true, nil
// (the records as stored) otherwise.
func QueryMask(q url.Values) Masker {
	if m := q.Get("mask"); m == "1" || strings.EqualFold(m, "true") {
		return DefaultMask()
	}
	return nil
}

// sentWriter notes whether a write reached the response, after which its status is sent.
type sentWriter struct {
	w    io.Writer
	sent bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		s.sent = true
	}
	return s.w.Write(p)
}

func writeLine(w *bufio.Writer, record []byte, mask Masker) error {
	if mask != nil {
		var err error
		if record, err = mask.Mask(record); err != nil {
			return err
		}
	}
	if _, err := w.Write(record); err != nil {
		return fmt.Errorf("store: export: %w", err)
	}
	if err := w.WriteByte('\n'); err != nil {
		return fmt.Errorf("store: export: %w", err)
	}
	return nil
}

// MaxLineBytes bounds one line of a JSONL export read by ReadJSONL.
const MaxLineBytes = 16 << 20

// LineError reports the line of a JSONL stream that could not be read.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("store: jsonl line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadJSONL calls fn with each line of r that holds a JSON object, in order, skipping blank
// lines. It stops at the first line that is not one JSON object (or is longer than
// MaxLineBytes), or at the first error from fn, and returns a *LineError naming the line and
// wrapping the cause. fn may not keep line after it returns.
func ReadJSONL(r io.Reader, fn func(line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for n := 1; ; n++ {
		line, err := readLine(br, &long)
		if err == io.EOF && line == nil {
			return nil
		}
		if err != nil && err != io.EOF {
			return &LineError{Line: n, Err: err}
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			if line[0] != '{' || !json.Valid(line) {
				return &LineError{Line: n, Err: errors.New("not a JSON object")}
			}
			if ferr := fn(line); ferr != nil {
				return &LineError{Line: n, Err: ferr}
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine returns the next line without its newline (nil at the end of input), using *long
// to assemble lines longer than br's buffer.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if err == io.EOF {
		if len(line) == 0 {
			return nil, io.EOF
		}
		return line, io.EOF
	}
	if err != bufio.ErrBufferFull {
		return nil, err
	}
	*long = append((*long)[:0], line...)
	for {
		line, err = br.ReadSlice('\n')
		if len(*long)+len(line) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		*long = append(*long, line...)
		switch err {
		case nil:
			return (*long)[:len(*long)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return *long, err
		}
	}
}

// ReadExecutions reads a JSONL export of execution records, calling fn with each. A line that
// is not an execution record is ErrInvalid.
func ReadExecutions(r io.Reader, fn func(*api.ExecutionRecord) error) error {
	return ReadJSONL(r, func(line []byte) error {
		x := new(api.ExecutionRecord)
		if err := x.UnmarshalJSON(line); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return fn(x)
	})
}

// ReadDecisions reads a JSONL export of decision records, calling fn with each; the metadata
// comes from the record's own record_id, action_key, outcome, verdict_id and timestamp
// members. A record without record_id is an error.
func ReadDecisions(r io.Reader, fn func(*Decision) error) error {
	return ReadJSONL(r, func(line []byte) error {
		var m struct {
			RecordID  string    `json:"record_id"`
			ActionKey string    `json:"action_key"` // null is ""
			Outcome   string    `json:"outcome"`
			VerdictID string    `json:"verdict_id"`
			Timestamp time.Time `json:"timestamp"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("decision record: %w", err)
		}
		if m.RecordID == "" {
			return fmt.Errorf("%w: decision record without record_id", ErrInvalid)
		}
		return fn(&Decision{
			DecisionMeta: DecisionMeta{
				RecordID: m.RecordID, ActionKey: m.ActionKey, Outcome: m.Outcome,
				VerdictID: m.VerdictID, Time: m.Timestamp,
			},
			Record: bytes.Clone(line),
		})
	})
}
