package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsageAndBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"-h"}, 0},
		{[]string{"nope"}, 2},
		{[]string{"serve"}, 2},
		{[]string{"serve", "--bogus"}, 2},
		{[]string{"version", "x"}, 2},
		{[]string{"version"}, 0},
		{[]string{"serve", "--config", "/nonexistent.yaml"}, 1},
	}
	for _, tt := range tests {
		if got := run(tt.args, io.Discard, io.Discard); got != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.args, got, tt.code)
		}
	}
}

// TestListenerInUse: an address that cannot be bound stops the start with an error at the
// config key that set it.
func TestListenerInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	for name, listens := range map[string]string{
		"listen":       "listen: " + taken.Addr().String() + "\n",
		"debug_listen": "listen: " + freeAddr + "\ndebug_listen: " + taken.Addr().String() + "\n",
	} {
		cfg := filepath.Join(dir, name+".yaml")
		body := listens + `public_url: http://127.0.0.1:1
oidc: {issuer: "http://127.0.0.1:9", client_id: native}
verdictd: {url: "http://127.0.0.1:8787", read_token_file: ` + token + `}
executor: {url: "http://127.0.0.1:8788", read_token_file: ` + token + `}
`
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		// At the key's line in the file: line 1 for listen, line 2 for debug_listen.
		line := map[string]string{"listen": ":1:1: ", "debug_listen": ":2:1: "}[name]
		if code := run([]string{"serve", "--config", cfg}, io.Discard, &stderr); code != 1 ||
			!strings.Contains(stderr.String(), cfg+line+name+` \"`+taken.Addr().String()+`\" cannot be bound`) ||
			!strings.Contains(stderr.String(), "address already in use") {
			t.Errorf("%s taken: exit %d\n%s", name, code, stderr.String())
		}
	}
}
