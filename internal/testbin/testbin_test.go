package testbin

import (
	"os"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testtool"
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
