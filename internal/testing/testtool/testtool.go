// Package testtool decides what a test does when the machine lacks something it needs: a
// program such as promtool or etcd, or a facility such as user namespaces. On a developer's
// machine the test is skipped with the reason, so that `go test ./...` runs what it can and the
// test command lists what it did not check. Under VERDICT_CI=1, which .ci/run sets on the
// machine it prepared with every program installed, the same test fails instead: in CI a test
// never passes by not running.
package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// CIEnv is the environment variable that says the tests run in CI: set to 1, every program a
// test needs is required.
const CIEnv = "VERDICT_CI"

// CI reports whether the tests run in CI (VERDICT_CI=1).
func CI() bool { return os.Getenv(CIEnv) == "1" }

// Missing ends t for want of something the machine lacks: it skips t with why, or fails it
// under VERDICT_CI=1.
func Missing(t testing.TB, why string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s (%s=1: every program a test needs is required)", why, CIEnv)
	}
	t.Skip(why)
}

// Path returns the path of the program name found on PATH. Without it, it ends t through
// Missing with "name is not installed: why"; why says where the program comes from and what
// goes unchecked without it.
func Path(t testing.TB, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed: "+why)
	}
	return p
}
