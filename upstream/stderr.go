package upstream

import (
	"bytes"
	"cmp"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

const (
	// StderrTailBytes bounds the tail of a stdio server's standard error
	// that is kept and attached to its failures: enough for the few lines
	// a server prints before it gives up, never a memory cost that grows
	// with a chatty server.
	StderrTailBytes = 4 << 10
	// stderrLineBytes bounds one logged line; the rest of a longer line is
	// dropped, so a server writing without newlines cannot grow a buffer
	// or a log line without limit.
	stderrLineBytes = 1 << 10
	// A server's stderr lines are logged at most stderrBurst at once and
	// stderrPerSecond a second after that: a server that floods its
	// stderr (by fault or on purpose) cannot flood the daemon's log. The
	// lines not logged are counted in one record when logging resumes, and
	// stay in the tail.
	stderrBurst     = 100
	stderrPerSecond = 10
)

// stderrLog receives a stdio child's standard error. Each line becomes a
// log record of its own (with the client's server attribute), so that the
// daemon's stderr stays one JSON object per line; the last lines are kept
// so that a failure to start, initialize or list can say what the server
// said before it failed. One stderrLog serves one process.
type stderrLog struct {
	log *slog.Logger

	mu        sync.Mutex
	partial   []byte // the current line, up to stderrLineBytes
	truncated bool   // the current line lost bytes past stderrLineBytes
	lines     []string
	size      int // bytes in lines, counting a newline after each

	now     func() time.Time
	tokens  float64   // lines that may be logged now, at most stderrBurst
	filled  time.Time // when tokens was last refilled
	dropped int       // lines not logged since the last one that was
}

func newStderrLog(log *slog.Logger) *stderrLog {
	return &stderrLog{log: log, now: time.Now, tokens: stderrBurst}
}

// allow reports whether one more line may be logged now. Caller holds mu.
func (s *stderrLog) allow() bool {
	now := s.now()
	if !s.filled.IsZero() {
		s.tokens = min(stderrBurst, s.tokens+now.Sub(s.filled).Seconds()*stderrPerSecond)
	}
	s.filled = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// Write takes a chunk of the child's output; it never fails, since a
// failing write would make the exec package stop copying.
func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if s.truncated {
			chunk = nil // the rest of a line already cut
		} else if room := stderrLineBytes - len(s.partial); len(chunk) > room {
			// Cut on a rune boundary: the log shows no replacement
			// character the server did not write.
			for room > 0 && !utf8.RuneStart(chunk[room]) {
				room--
			}
			chunk = chunk[:room]
			s.truncated = true
		}
		s.partial = append(s.partial, chunk...)
		if i < 0 {
			break
		}
		s.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// flush ends a last line that had no newline. It is called once the
// child has exited and its output has been copied.
func (s *stderrLog) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 || s.truncated {
		s.endLine()
	}
	s.logDropped()
}

// logDropped logs how many lines were not logged, if any. Caller holds mu.
func (s *stderrLog) logDropped() {
	if s.dropped > 0 {
		s.log.Warn("server stderr lines not logged", "count", s.dropped, "reason", "rate_limited")
		s.dropped = 0
	}
}

// endLine logs the current line and keeps it in the tail. Caller holds mu.
func (s *stderrLog) endLine() {
	line := strings.TrimSuffix(string(s.partial), "\r")
	if s.truncated {
		line += " …"
	}
	switch {
	case !s.allow():
		s.dropped++
	default:
		s.logDropped()
		if s.truncated {
			s.log.Info("server stderr", "line", line, "truncated", true)
		} else {
			s.log.Info("server stderr", "line", line)
		}
	}
	s.partial, s.truncated = s.partial[:0], false
	s.lines = append(s.lines, line)
	s.size += len(line) + 1
	drop := 0
	for s.size > StderrTailBytes && drop < len(s.lines)-1 {
		s.size -= len(s.lines[drop]) + 1
		drop++
	}
	if drop > 0 {
		s.lines = append(s.lines[:0], s.lines[drop:]...)
	}
}

// tail returns the last lines written, oldest first, newline-separated,
// with a line not yet ended last; "" if nothing was written.
func (s *stderrLog) tail() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.lines
	if len(s.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(s.partial))
	}
	out := strings.Join(lines, "\n")
	if len(out) > StderrTailBytes {
		// One line longer than the tail (only the one being written can
		// be): keep its end.
		out = out[len(out)-StderrTailBytes:]
	}
	return out
}

// StderrError is a failure of a stdio server together with the last
// lines the server wrote to its standard error, which usually say why it
// failed (a directory it cannot open, a flag it does not know, a crash).
// Its message is the wrapped error's: the tail is multi-line text of the
// server's, meant for a field of its own in a log record or a report of
// its own. Use [StderrTail] to read it from an error.
type StderrError struct {
	Server string
	// Stderr is at most StderrTailBytes of the server's last output on
	// standard error, lines separated by "\n".
	Stderr string
	Err    error
}

func (e *StderrError) Error() string { return e.Err.Error() }

func (e *StderrError) Unwrap() error { return e.Err }

// StderrTail returns the tail of standard error attached to err, or ""
// if err carries none (an HTTP server, or a stdio server that wrote
// nothing).
func StderrTail(err error) string {
	if e, ok := errors.AsType[*StderrError](err); ok {
		return e.Stderr
	}
	return ""
}

// withStderr attaches the tail of s to err, unless err carries one
// already or s has nothing to say.
func withStderr(server string, s *stderrLog, err error) error {
	if err == nil || StderrTail(err) != "" {
		return err
	}
	tail := s.tail()
	if tail == "" {
		return err
	}
	return &StderrError{Server: server, Stderr: tail, Err: err}
}

// logFailure logs a server's failure to start, initialize or list at
// error level, with the tail of its standard error when it has one.
func logFailure(log *slog.Logger, msg string, err error, args ...any) {
	log.Error(msg, append(stderrAttrs(err, nil), args...)...)
}

// stderrAttrs are the log attributes of a server failure: the error, and
// the tail of standard error the error carries, or else s's.
func stderrAttrs(err error, s *stderrLog) []any {
	attrs := []any{"error", err.Error()}
	if tail := cmp.Or(StderrTail(err), s.tail()); tail != "" {
		attrs = append(attrs, "stderr", tail)
	}
	return attrs
}
