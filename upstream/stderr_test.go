package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer collects JSON log records, safe for the goroutines that copy a
// child's stderr.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records returns every record logged, each decoded.
func (b *logBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not one JSON record: %q", line)
		}
		out = append(out, rec)
	}
	return out
}

func TestStderrLogLinesAndTail(t *testing.T) {
	long := strings.Repeat("é", stderrLineBytes) // 2 bytes each: cut inside the line
	tests := []struct {
		name   string
		writes []string
		lines  []string // logged, in order
		tail   string
	}{
		{"nothing", nil, nil, ""},
		{"lines in pieces", []string{"bo", "om\nsec", "ond\r\n"}, []string{"boom", "second"}, "boom\nsecond"},
		{"last line without newline", []string{"a\nb"}, []string{"a", "b"}, "a\nb"},
		{"blank line", []string{"\n"}, []string{""}, ""},
		{"long line cut on a rune", []string{long + "\nnext\n"},
			[]string{strings.Repeat("é", stderrLineBytes/2) + " …", "next"},
			strings.Repeat("é", stderrLineBytes/2) + " …\nnext"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lb logBuffer
			s := newStderrLog(lb.logger().With("server", "fs"))
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write: %d %v", n, err)
				}
			}
			s.flush()
			var got []string
			for _, rec := range lb.records(t) {
				if rec["msg"] != "server stderr" || rec["server"] != "fs" || rec["level"] != "INFO" {
					t.Errorf("record %v", rec)
				}
				got = append(got, rec["line"].(string))
			}
			if strings.Join(got, "|") != strings.Join(tt.lines, "|") {
				t.Errorf("logged %q, want %q", got, tt.lines)
			}
			if tail := s.tail(); tail != tt.tail {
				t.Errorf("tail %q, want %q", tail, tt.tail)
			}
		})
	}
}

func TestStderrTailIsBounded(t *testing.T) {
	s := newStderrLog(slog.New(slog.DiscardHandler))
	line := strings.Repeat("x", 99) + "\n"
	for range 1000 {
		s.Write([]byte(line))
	}
	s.Write([]byte("the end\n"))
	tail := s.tail()
	if len(tail) > StderrTailBytes || !strings.HasSuffix(tail, "\nthe end") || !strings.HasPrefix(tail, "xxx") {
		t.Fatalf("tail of %d bytes: ...%q", len(tail), tail[max(0, len(tail)-40):])
	}
	if len(s.lines) > StderrTailBytes/100+1 {
		t.Fatalf("%d lines kept", len(s.lines))
	}
}

// A stdio server that fails to start says why on its stderr: the failure
// is logged at error level with that text, and the error carries it.
func TestServerThatFailsToStartIsLoggedWithItsStderr(t *testing.T) {
	var lb logBuffer
	opts := CatalogOptions{Client: Options{Logger: lb.logger()}}
	c, err := NewCatalog(map[string]Config{
		"fs": {Command: []string{"sh", "-c", "echo 'Error: /srv/data: no such directory' >&2; echo 'None of the specified directories are accessible' >&2; exit 1"}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Refresh(testContext(t))
	if err == nil {
		t.Fatal("a server that exits at once was listed")
	}
	const want = "Error: /srv/data: no such directory\nNone of the specified directories are accessible"
	if got := StderrTail(err); got != want {
		t.Errorf("StderrTail(%v) = %q, want %q", err, got, want)
	}
	if se, ok := errors.AsType[*StderrError](err); !ok || se.Server != "fs" || strings.Contains(se.Error(), "None of") {
		t.Errorf("error %v: want a *StderrError for fs whose message is the failure's alone", err)
	}
	if st := c.Status(); len(st) != 1 || StderrTail(st[0].Err) != want {
		t.Errorf("status %+v does not carry the stderr", st)
	}
	var failures, lines int
	for _, rec := range lb.records(t) {
		switch rec["msg"] {
		case "upstream listing failed":
			failures++
			if rec["level"] != "ERROR" || rec["server"] != "fs" || rec["stderr"] != want || rec["error"] == "" {
				t.Errorf("failure record %v", rec)
			}
		case "server stderr":
			lines++
			if rec["server"] != "fs" {
				t.Errorf("stderr line without its server: %v", rec)
			}
		}
	}
	if failures != 1 || lines != 2 {
		t.Errorf("%d failure records and %d stderr lines, want 1 and 2:\n%v", failures, lines, lb.records(t))
	}
}

// TestStderrRateLimited: a server flooding its stderr gets stderrBurst lines logged, then
// stderrPerSecond a second; the lines not logged are counted once logging resumes, and the
// tail keeps the newest lines either way.
func TestStderrRateLimited(t *testing.T) {
	var lb logBuffer
	s := newStderrLog(lb.logger())
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	for i := range 1000 {
		fmt.Fprintf(s, "line %d\n", i)
	}
	now = now.Add(time.Second) // room for stderrPerSecond more lines
	s.Write([]byte("after a second\n"))
	s.flush()
	var logged, dropped int
	var last string
	for _, rec := range lb.records(t) {
		switch rec["msg"] {
		case "server stderr":
			logged++
			last = rec["line"].(string)
		case "server stderr lines not logged":
			if rec["level"] != "WARN" || rec["reason"] != "rate_limited" {
				t.Errorf("record %v", rec)
			}
			dropped += int(rec["count"].(float64))
		}
	}
	if logged != stderrBurst+1 || dropped != 1000-stderrBurst || last != "after a second" {
		t.Fatalf("logged %d (last %q), counted %d not logged; want %d, %q, %d",
			logged, last, dropped, stderrBurst+1, "after a second", 1000-stderrBurst)
	}
	if !strings.HasSuffix(s.tail(), "line 999\nafter a second") {
		t.Fatalf("tail ends %q", s.tail()[len(s.tail())-40:])
	}
}
