package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: version prints one line naming the command, its version and revision (or that
// they are unknown) and the toolchain; it takes no arguments.
func TestVersion(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"version", "--json"}, 2},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if got := run(tt.args, strings.NewReader(""), &out, &errb); got != tt.code {
			t.Fatalf("%v: exit %d, want %d\n%s%s", tt.args, got, tt.code, out.String(), errb.String())
		}
		if tt.code != 0 {
			if out.Len() != 0 || !strings.Contains(errb.String(), "usage: mcpgate version") {
				t.Errorf("%v: stdout %q, stderr %q", tt.args, out.String(), errb.String())
			}
			continue
		}
		line := out.String()
		if !strings.HasPrefix(line, "mcpgate version ") || !strings.Contains(line, ", revision ") ||
			!strings.Contains(line, runtime.Version()) || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Errorf("version printed %q", line)
		}
	}
}
