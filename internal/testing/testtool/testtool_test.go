package testtool

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a test ended: Skip and Fatal end its goroutine, as
// they do a test's.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// end runs f on a recorder in a goroutine of its own and returns the recorder once f ended.
func end(f func(t testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestMissing: a missing program skips the test, or fails it under VERDICT_CI=1.
func TestMissing(t *testing.T) {
	tests := []struct {
		ci          string
		wantSkipped string
		wantFailed  string
	}{
		{"", "no-such-program is not installed: x", ""},
		{"0", "no-such-program is not installed: x", ""},
		{"1", "", "no-such-program is not installed: x (VERDICT_CI=1: every program a test needs is required)"},
	}
	for _, tt := range tests {
		t.Run("VERDICT_CI="+tt.ci, func(t *testing.T) {
			t.Setenv(CIEnv, tt.ci)
			r := end(func(tb testing.TB) {
				Path(tb, "no-such-program", "x")
				tb.Fatalf("Path returned without the program")
			})
			if r.skipped != tt.wantSkipped || r.failed != tt.wantFailed {
				t.Errorf("skipped %q, failed %q; want skipped %q, failed %q", r.skipped, r.failed, tt.wantSkipped, tt.wantFailed)
			}
		})
	}
}

func TestPathFindsAProgram(t *testing.T) {
	t.Setenv(CIEnv, "1")
	r := end(func(tb testing.TB) {
		if p := Path(tb, "go", "the go command"); !strings.HasSuffix(p, "go") {
			tb.Fatalf("Path = %q", p)
		}
	})
	if r.skipped != "" || r.failed != "" {
		t.Fatalf("skipped %q, failed %q", r.skipped, r.failed)
	}
}
