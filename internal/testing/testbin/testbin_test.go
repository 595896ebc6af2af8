package testbin

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

func TestBinaryBuildsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a command")
	}
	bank := New("github.com/verdictgate/verdict/examples/bank")
	defer bank.Remove()
	p := bank.Path(t)
	if again := bank.Path(t); again != p {
		t.Fatalf("second Path = %s, want %s", again, p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	bank.Remove()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("after Remove: %v", err)
	}
}

func TestBuildReportsCompilerOutput(t *testing.T) {
	testtool.Path(t, "go", "Build runs the go command")
	_, err := Build(t.TempDir(), "x", "github.com/verdictgate/verdict/no/such/package")
	if err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Fatalf("err = %v, want the compiler's complaint about the package", err)
	}
}

// The harnesses under internal/testing start processes, skip tests and hold test-only code: a
// package a binary is built from must never import one.
func TestHarnessesOnlyInTests(t *testing.T) {
	testtool.Path(t, "go", "go list reads the module's imports")
	const harnesses = "github.com/verdictgate/verdict/internal/testing/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}",
		"github.com/verdictgate/verdict/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], harnesses) {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, harnesses) {
				t.Errorf("%s imports %s outside its tests", fields[0], imp)
			}
		}
	}
}
