package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/mcpgate"
)

func TestUsageAndExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"no command", nil, 2},
		{"help", []string{"-h"}, 0},
		{"unknown command", []string{"frobnicate"}, 2},
		{"serve without config", []string{"serve"}, 2},
		{"serve with a stray argument", []string{"serve", "--config", "x.yaml", "extra"}, 2},
		{"serve with a bad flag", []string{"serve", "--nope"}, 2},
		{"missing config file", []string{"serve", "--config", filepath.Join(t.TempDir(), "none.yaml")}, 1},
	} {
		var out, errb bytes.Buffer
		if got := run(tc.args, strings.NewReader(""), &out, &errb); got != tc.want {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.name, got, tc.want, out.String(), errb.String())
		}
	}
}

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := mcpgate.LoadConfig("../../examples/mcpgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != mcpgate.ModeEnforce || cfg.StdioPrincipal != "u_01" {
		t.Errorf("example config: %+v", cfg)
	}
}

func TestConfigProblemsAreAllReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("mode: loose\nverdictd: {url: ftp://x}\ndebug_listen: 0.0.0.0:6060\nprincipals: {u: {token_sha256: xyz}}\nstdio_principal: nobody\n"), 0o600)
	_, err := mcpgate.LoadConfig(path)
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"mode", "policy", "verdictd", "executor", "state_key_file", "token_sha256", "stdio_principal", "debug_listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}
