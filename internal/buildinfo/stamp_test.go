package buildinfo

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStampApply(t *testing.T) {
	base := Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.8"}
	tests := []struct {
		name  string
		stamp Stamp
		want  Info
	}{
		{"empty stamp says nothing", Stamp{}, base},
		{"release", Stamp{Version: "v1.2.3", Revision: "abc", Time: "2026-01-02T03:04:05Z", Modified: "false"},
			Info{Version: "v1.2.3", Revision: "abc", Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.8"}},
		{"modified tree", Stamp{Revision: "abc", Modified: "true"},
			Info{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.26.8"}},
		{"unknown modified value leaves the toolchain's word", Stamp{Modified: "yes"}, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.stamp.Apply(base); got != tt.want {
				t.Fatalf("Apply = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStampLinkerFlags(t *testing.T) {
	got := strings.Join(Stamp{Version: "v1.0.0", Modified: "false"}.LinkerFlags(), " ")
	want := "-X github.com/verdictgate/verdict/internal/buildinfo.stampVersion=v1.0.0 " +
		"-X github.com/verdictgate/verdict/internal/buildinfo.stampModified=false"
	if got != want {
		t.Fatalf("LinkerFlags = %q, want %q", got, want)
	}
}

// TestStampLinked builds a program with the flags and reads back what it prints: the names in
// LinkerFlags must be the variables the linker writes.
func TestStampLinked(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a program")
	}
	dir := t.TempDir()
	flags := Stamp{Version: "v9.8.7", Revision: "0123abcd", Modified: "true"}.LinkerFlags()
	bin := filepath.Join(dir, "stamped")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.Join(flags, " "), "-o", bin, "./testdata/stamped")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "v9.8.7 0123abcd true"; got != want {
		t.Fatalf("stamped binary says %q, want %q", got, want)
	}
}
