package nodetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// recorder is a testing.TB that records how Install ended: Skip and Fatal end its goroutine, as
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

func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fakeNode writes an executable at path that prints version as node --version does.
func fakeNode(t *testing.T, path, version string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestInstallPicksNode: a program installed in place runs on its NodePackage's binary whatever
// node PATH holds (or lacks), and one older than MinNode is the lock file's error; a program
// without NodePackage runs on PATH's node, skipped without one or with one too old. None of
// the cases installs anything.
func TestInstallPicksNode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake node binaries are shell scripts")
	}
	tests := []struct {
		name        string
		nodePackage string
		packaged    string // the version the package's binary prints; "" for no binary
		onPath      string // the version PATH's node prints; "" for no node on PATH
		wantNode    string // "packaged" or "path"
		wantSkipped string
		wantFailed  string
	}{
		{name: "packaged node, none on PATH", nodePackage: "node-fake", packaged: "v22.23.5", wantNode: "packaged"},
		{name: "packaged node before an old one on PATH", nodePackage: "node-fake", packaged: "v22.23.5", onPath: "v18.0.0", wantNode: "packaged"},
		{name: "packaged node too old", nodePackage: "node-fake", packaged: "v20.1.0", onPath: "v24.0.0", wantFailed: "older than 22"},
		{name: "packaged node not installed", nodePackage: "node-fake", onPath: "v24.0.0", wantSkipped: "has no node binary"},
		{name: "PATH's node", onPath: "v22.0.0", wantNode: "path"},
		{name: "PATH's node too old", onPath: "v20.0.0", wantSkipped: "node 20.0.0 is older than 22"},
		{name: "no node", wantSkipped: "node not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(testtool.CIEnv, "")
			root := t.TempDir()
			dir := filepath.Join(root, "program")
			pkg := filepath.Join(dir, "node_modules", "dep")
			if err := os.MkdirAll(pkg, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version": "1.0.0"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			packaged := filepath.Join(dir, "node_modules", "node-fake", "bin", "node")
			if tt.packaged != "" {
				fakeNode(t, packaged, tt.packaged)
			}
			bin := filepath.Join(root, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.onPath != "" {
				fakeNode(t, filepath.Join(bin, "node"), tt.onPath)
			}
			t.Setenv("PATH", bin)
			p := Program{Dir: dir, Name: "fake", Pinned: map[string]string{"dep": "1.0.0"}, MinNode: 22, NodePackage: tt.nodePackage}

			r := &recorder{TB: t}
			var node, got string
			done := make(chan struct{})
			go func() {
				defer close(done)
				node, got = Install(r, p)
			}()
			<-done
			if !strings.Contains(r.skipped, tt.wantSkipped) || (tt.wantSkipped == "") != (r.skipped == "") {
				t.Errorf("skipped %q, want %q", r.skipped, tt.wantSkipped)
			}
			if !strings.Contains(r.failed, tt.wantFailed) || (tt.wantFailed == "") != (r.failed == "") {
				t.Errorf("failed %q, want %q", r.failed, tt.wantFailed)
			}
			if tt.wantNode == "" {
				return
			}
			want := map[string]string{"packaged": packaged, "path": filepath.Join(bin, "node")}[tt.wantNode]
			if node != want || got != dir {
				t.Errorf("Install = %q, %q; want %q, %q", node, got, want, dir)
			}
		})
	}
}
