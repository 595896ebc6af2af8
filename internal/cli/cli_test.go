package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const testUsage = "usage: prog <command>\n"

func TestMainDispatch(t *testing.T) {
	echo := func(args []string, stdout, _ io.Writer) int {
		io.WriteString(stdout, strings.Join(args, ","))
		return 7
	}
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // stdout "*" is the version line, checked apart
	}{
		{"no command", nil, 2, "", testUsage},
		{"a command gets the rest", []string{"echo", "a", "b"}, 7, "a,b", ""},
		{"help", []string{"help"}, 0, testUsage, ""},
		{"-h", []string{"-h"}, 0, testUsage, ""},
		{"-help", []string{"-help"}, 0, testUsage, ""},
		{"--help", []string{"--help"}, 0, testUsage, ""},
		{"unknown", []string{"nope"}, 2, "", "prog: unknown command \"nope\"\n" + testUsage},
		{"version", []string{"version"}, 0, "*", ""},
		{"version takes no argument", []string{"version", "x"}, 2, "", "usage: prog version\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main("prog", testUsage, map[string]Command{"echo": echo}, tt.args, &out, &errb)
			if code != tt.code || errb.String() != tt.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errb.String(), tt.code, tt.stderr)
			}
			if tt.stdout == "*" {
				line := out.String()
				if !strings.HasPrefix(line, "prog version ") || !strings.Contains(line, runtime.Version()) || !strings.HasSuffix(line, "\n") {
					t.Errorf("version printed %q", line)
				}
				return
			}
			if out.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tt.stdout)
			}
		})
	}
}

func TestKeygen(t *testing.T) {
	keygen := Keygen("prog")
	dir := filepath.Join(t.TempDir(), "keys")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // a prefix
		wrote  bool
	}{
		{"no --out", nil, 2, "usage: prog keygen --out DIR [--alg EdDSA|ES256]\n", false},
		{"an algorithm it does not sign with", []string{"--out", dir, "--alg", "RS256"}, 2, "usage: prog keygen", false},
		{"an argument", []string{"--out", dir, "extra"}, 2, "usage: prog keygen", false},
		{"an unknown flag", []string{"--bogus"}, 2, "flag provided but not defined: -bogus", false},
		{"-h", []string{"-h"}, 0, "usage: prog keygen", false},
		{"writes the key", []string{"--out", dir, "--alg", "ES256"}, 0, "", true},
		{"never overwrites one", []string{"--out", dir}, 1, "prog keygen: ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := keygen(tt.args, &out, &errb); code != tt.code || !strings.HasPrefix(errb.String(), tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d, %q…", code, errb.String(), tt.code, tt.stderr)
			}
			if !tt.wrote {
				return
			}
			if want := "wrote " + dir + "/signing.jwk and " + dir + "/jwks.json (kid "; !strings.HasPrefix(out.String(), want) ||
				!strings.HasSuffix(out.String(), ", ES256)\n") {
				t.Errorf("stdout %q", out.String())
			}
			fi, err := os.Stat(filepath.Join(dir, "signing.jwk"))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("signing.jwk: %v %v", err, fi)
			}
		})
	}
}
