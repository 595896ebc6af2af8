package release

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSource is the commit the tests' release claims to be: fixed, so that every name and
// stamp is known in advance.
var testSource = Source{
	Version:  "v0.0.0-20261202030405-0123456789ab",
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Time:     time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC),
}

// hostTarget is the one platform the tests build: the host's, so that the binaries can run.
var hostTarget = Target{"linux", runtime.GOARCH}

// built is one release of the module, shared by every test of the package: four static
// builds are the expensive part.
var built struct {
	once sync.Once
	dir  string
	arts []Artifact
	err  error
}

// testRelease builds a release for the host's platform with the release command itself, as a
// process: packaging and compressing tens of megabytes inside a race-instrumented test binary
// takes minutes, in the command seconds.
func testRelease(t *testing.T) (string, []Artifact) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the release build compiles four binaries")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the release is built for linux/amd64 and linux/arm64; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	built.once.Do(func() {
		// Not t.TempDir: the release outlives the first test that asks for it; TestMain
		// removes it.
		if built.dir, built.err = os.MkdirTemp("", "verdict-release-test-"); built.err != nil {
			return
		}
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			built.err = err
			return
		}
		cmdBin := filepath.Join(built.dir, "release")
		build := exec.Command("go", "build", "-o", cmdBin, "./deploy/release")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./deploy/release: %v\n%s", err, out)
			return
		}
		dist := filepath.Join(built.dir, "dist")
		run := exec.Command(cmdBin, "-out", dist, "-targets", hostTarget.String(),
			"-version", testSource.Version, "-revision", testSource.Revision,
			"-time", testSource.Time.Format(time.RFC3339))
		run.Dir = root
		if out, err := run.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("deploy/release: %v\n%s", err, out)
			return
		}
		for _, d := range Daemons {
			built.arts = append(built.arts,
				Artifact{"binary", d.Command, hostTarget, filepath.Join(dist, BinaryDir(testSource, hostTarget), d.Command)},
				Artifact{"deb", d.Command, hostTarget, filepath.Join(dist, DebFileName(d, testSource, hostTarget))},
				Artifact{"image", d.Command, hostTarget, filepath.Join(dist, ImageFileName(d, testSource, hostTarget))})
		}
		built.arts = append(built.arts, Artifact{Kind: "sums", Path: filepath.Join(dist, "SHA256SUMS")})
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "dist"), built.arts
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func artifact(t *testing.T, arts []Artifact, kind, daemon string) string {
	t.Helper()
	for _, a := range arts {
		if a.Kind == kind && a.Daemon == daemon {
			return a.Path
		}
	}
	t.Fatalf("no %s artifact for %q", kind, daemon)
	return ""
}

// TestReleaseSums checks that SHA256SUMS names every artifact, once, with its digest, and
// nothing else.
func TestReleaseSums(t *testing.T) {
	dist, arts := testRelease(t)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", line)
		}
		if _, dup := listed[name]; dup {
			t.Errorf("SHA256SUMS lists %s twice", name)
		}
		listed[name] = sum
	}
	n := 0
	for _, a := range arts {
		if a.Kind == "sums" {
			continue
		}
		n++
		rel, _ := filepath.Rel(dist, a.Path)
		data, err := os.ReadFile(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(data)
		if listed[rel] != hex.EncodeToString(got[:]) {
			t.Errorf("SHA256SUMS has %q for %s, want %x", listed[rel], rel, got)
		}
	}
	if want := 3 * len(Daemons); len(listed) != n || n != want {
		t.Errorf("SHA256SUMS lists %d files, the release wrote %d (want %d: a binary, a package and an image per daemon)", len(listed), n, want)
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "--check", "--strict", "SHA256SUMS")
		cmd.Dir = dist
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, out)
		}
	}
}

// TestReleaseBinaries checks that every binary is static, for its platform, and says which
// build it is.
func TestReleaseBinaries(t *testing.T) {
	_, arts := testRelease(t)
	for _, d := range Daemons {
		t.Run(d.Command, func(t *testing.T) {
			bin := artifact(t, arts, "binary", d.Command)
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s has a %v program header: not static", d.Command, p.Type)
				}
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Errorf("%s links %v", d.Command, libs)
			}
			out, err := exec.Command(bin, "version").Output()
			if err != nil {
				t.Fatalf("%s version: %v", d.Command, err)
			}
			want := d.Command + " version " + testSource.Version + ", revision " + testSource.Revision +
				" of 2026-12-02T03:04:05Z, built with " + runtime.Version() + " for linux/" + hostTarget.Arch + "\n"
			if string(out) != want {
				t.Errorf("%s version printed\n%q, want\n%q", d.Command, out, want)
			}
			// -trimpath: no path of the machine that built it.
			data, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			wd, _ := os.Getwd()
			if root := filepath.Dir(filepath.Dir(wd)); strings.Contains(string(data), root+"/") {
				t.Errorf("%s holds the build directory %s", d.Command, root)
			}
		})
	}
}

func TestParseTargets(t *testing.T) {
	tests := []struct {
		in      string
		want    []Target
		wantErr bool
	}{
		{"linux/amd64,linux/arm64", DefaultTargets, false},
		{" linux/arm64 ", []Target{{"linux", "arm64"}}, false},
		{"darwin/arm64", nil, true},
		{"linux/386", nil, true},
		{"linux", nil, true},
		{"", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseTargets(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTargets(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && (len(got) != len(tt.want) || got[0] != tt.want[0]) {
			t.Errorf("ParseTargets(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
