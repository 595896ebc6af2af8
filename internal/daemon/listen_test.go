package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An address that cannot be bound is reported at the config key that set it, in the file and
// at the line of that key, with what to do.
func TestListenNamesTheConfigKey(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct {
		name, key, addr string
		asRoot          bool // the case happens when the tests run as root too
		is              error
		hint            string
	}{
		{"in use", "listen", taken.Addr().String(), true, syscall.EADDRINUSE, "another process listens there"},
		{"debug address in use", "debug_listen", taken.Addr().String(), true, syscall.EADDRINUSE, "set debug_listen to a free port"},
		{"not this host's address", "listen", "192.0.2.1:0", true, syscall.EADDRNOTAVAIL, "no interface of this host has that address"},
		{"privileged port", "listen", "127.0.0.1:1", false, syscall.EACCES, "CAP_NET_BIND_SERVICE"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		if !tt.asRoot && os.Geteuid() == 0 {
			continue // root binds any port
		}
		config := filepath.Join(dir, "daemon.yaml")
		body := "data_dir: /var/lib/x\n" + tt.key + ": " + tt.addr + "\n"
		if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ln, err := Listen(config, tt.key, tt.addr)
		if err == nil {
			ln.Close()
			t.Errorf("%s: Listen(%s) succeeded", tt.name, tt.addr)
			continue
		}
		want := config + ":2:1: " + tt.key + ` "` + tt.addr + `" cannot be bound: `
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tt.hint) {
			t.Errorf("%s: error = %v\nwant it to start %q and say %q", tt.name, err, want, tt.hint)
		}
		if !errors.Is(err, tt.is) {
			t.Errorf("%s: errors.Is(err, %v) is false: %v", tt.name, tt.is, err)
		}
		if be, ok := errors.AsType[*BindError](err); !ok || be.Key != tt.key {
			t.Errorf("%s: no *BindError for %s: %#v", tt.name, tt.key, err)
		}
	}
}

// The hint for each usual cause, from the error net.Listen returns for it. The tests above bind
// for real; this one also covers a privileged port where the tests run as root (which binds
// any port) or where the system lets anyone bind one.
func TestBindErrorHints(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		hint  string
	}{
		{syscall.EADDRINUSE, "; another process listens there (ss -ltnp shows which): stop it, or set listen to a free port"},
		{syscall.EACCES, "; a port below 1024 needs root or CAP_NET_BIND_SERVICE: grant the capability, or set listen to a port from 1024 up"},
		{syscall.EADDRNOTAVAIL, "; no interface of this host has that address: set listen to one of its own addresses"},
		{syscall.ECONNREFUSED, ""}, // no usual fix to suggest
	}
	for _, tt := range tests {
		cause := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", tt.errno)}
		err := &BindError{Key: "listen", Addr: "127.0.0.1:80", Err: cause}
		want := `listen "127.0.0.1:80" cannot be bound: ` + cause.Error() + tt.hint
		if err.Error() != want {
			t.Errorf("%v: %q, want %q", tt.errno, err.Error(), want)
		}
		if !errors.Is(err, tt.errno) {
			t.Errorf("%v: errors.Is is false", tt.errno)
		}
	}
}
