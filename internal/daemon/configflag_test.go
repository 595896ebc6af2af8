package daemon

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestConfigFlag(t *testing.T) {
	tests := []struct {
		args     []string
		path     string
		code     int
		ok       bool
		inOutput string
	}{
		{[]string{"--config", "a.yaml"}, "a.yaml", 0, true, ""},
		{[]string{"-config=a.yaml", "--extra"}, "a.yaml", 0, true, ""},
		{nil, "", 2, false, "usage: x serve --config FILE"},
		{[]string{"--config", "a.yaml", "stray"}, "", 2, false, "usage: x serve --config FILE"},
		{[]string{"--nope"}, "", 2, false, "flag provided but not defined"},
		{[]string{"-h"}, "", 0, false, "-config file"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		fs := flag.NewFlagSet("x serve", flag.ContinueOnError)
		fs.SetOutput(&out)
		fs.Bool("extra", false, "a command's own flag")
		path, code, ok := ConfigFlag(fs, tt.args, "x serve --config FILE")
		if path != tt.path || code != tt.code || ok != tt.ok {
			t.Errorf("%q: got (%q, %d, %v), want (%q, %d, %v)", tt.args, path, code, ok, tt.path, tt.code, tt.ok)
		}
		if !strings.Contains(out.String(), tt.inOutput) {
			t.Errorf("%q: output %q lacks %q", tt.args, out.String(), tt.inOutput)
		}
	}
}
