package ship

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/store"
)

// A Record is one record as a sink receives it.
type Record struct {
	Seq      uint64
	Kind     string // "decision" or "execution"
	RecordID string
	JSON     []byte // the record, masked unless the sink is unmasked
}

// A Sink delivers batches. Send returns nil only when the whole batch is durably taken: the
// cursor moves past it then, and it is not sent again.
type Sink interface {
	Send(ctx context.Context, batch []Record) error
}

// Labels name the daemon in every event an OPA-format sink receives.
type Labels struct {
	App     string `json:"app"`     // "verdictd" or "executor"
	ID      string `json:"id"`      // the instance (the data file's id)
	Version string `json:"version"` // the build's version
}

// httpSink posts gzip-compressed batches.
type httpSink struct {
	url, format string
	token       string
	timeout     time.Duration
	client      *http.Client
	labels      Labels
}

func newHTTPSink(c *HTTPSink, client *http.Client, labels Labels) (*httpSink, error) {
	s := &httpSink{url: c.URL, format: c.Format, timeout: c.Timeout.Or(DefaultHTTPTimeout), client: client, labels: labels}
	if s.format == "" {
		s.format = FormatOPA
	}
	if c.TokenFile != "" {
		b, err := opfile.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("ship: token_file: %w", err)
		}
		if s.token = strings.TrimSpace(string(b)); s.token == "" {
			return nil, fmt.Errorf("ship: token_file %s is empty", c.TokenFile)
		}
	}
	return s, nil
}

// event is the OPA decision-log event a record travels in: the record is the event's result,
// and req_id is the record change's sequence number in the daemon's outbox, which a consumer
// can deduplicate on (with labels.id: sequences are per data file).
type event struct {
	Labels     Labels          `json:"labels"`
	DecisionID string          `json:"decision_id"`
	ReqID      uint64          `json:"req_id"`
	Path       string          `json:"path"`
	Result     json.RawMessage `json:"result"`
	Timestamp  string          `json:"timestamp"`
	Masked     []string        `json:"masked,omitempty"`
}

func (s *httpSink) body(batch []Record) ([]byte, string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	ctype := "application/json"
	switch s.format {
	case FormatJSONL:
		ctype = "application/x-ndjson"
		for _, r := range batch {
			zw.Write(r.JSON)
			zw.Write([]byte{'\n'})
		}
	default:
		events := make([]event, len(batch))
		for i, r := range batch {
			events[i] = event{Labels: s.labels, DecisionID: r.RecordID, ReqID: r.Seq, Path: "verdict/" + r.Kind,
				Result: r.JSON, Timestamp: recordTime(r)}
		}
		if err := json.NewEncoder(zw).Encode(events); err != nil {
			return nil, "", err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), ctype, nil
}

func (s *httpSink) Send(ctx context.Context, batch []Record) error {
	body, ctype, err := s.body(batch)
	if err != nil {
		return fmt.Errorf("ship: encode batch: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Content-Encoding", "gzip")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("ship: post %s: %w", s.url, err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return &StatusError{Code: res.StatusCode}
	}
	return nil
}

// StatusError is a sink's answer other than 2xx.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return "ship: sink answered " + strconv.Itoa(e.Code) }

// recordTime is the time the record was decided or the execution finished (or started), for the
// event's timestamp; the shipping time when the record names none.
func recordTime(r Record) string {
	var t struct {
		Timestamp  string `json:"timestamp"`
		FinishedAt string `json:"finished_at"`
		StartedAt  string `json:"started_at"`
	}
	_ = json.Unmarshal(r.JSON, &t)
	for _, v := range []string{t.Timestamp, t.FinishedAt, t.StartedAt} {
		if v != "" {
			return v
		}
	}
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// fileSink appends JSONL to a file, syncs it before answering, and rotates it by size.
type fileSink struct {
	path     string
	maxBytes int64
	maxFiles int
}

func newFileSink(c *FileSink) *fileSink {
	s := &fileSink{path: c.Path, maxBytes: c.MaxBytes, maxFiles: c.MaxFiles}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.maxFiles == 0 {
		s.maxFiles = DefaultMaxFiles
	}
	return s
}

func (s *fileSink) Send(ctx context.Context, batch []Record) error {
	if err := s.rotate(); err != nil {
		return err
	}
	f, err := opfile.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	var buf bytes.Buffer
	for _, r := range batch {
		buf.Write(r.JSON)
		buf.WriteByte('\n')
	}
	_, werr := f.Write(buf.Bytes())
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("ship: write %s: %w", s.path, err)
	}
	return nil
}

// rotate renames path to path.1 (path.1 to path.2, …, dropping the oldest) when path has
// grown past maxBytes.
func (s *fileSink) rotate() error {
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ship: %w", opfile.Explain(err))
	}
	if fi.Size() < s.maxBytes {
		return nil
	}
	for i := s.maxFiles; i >= 1; i-- {
		from := s.path
		if i > 1 {
			from = s.path + "." + strconv.Itoa(i-1)
		}
		if err := os.Rename(from, s.path+"."+strconv.Itoa(i)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("ship: rotate %s: %w", s.path, err)
		}
	}
	return nil
}

// kindName names an outbox entry's kind.
func kindName(k byte) string {
	if k == store.OutboxDecision {
		return "decision"
	}
	return "execution"
}
