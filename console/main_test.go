package console

import (
	"os"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// opCmd is the example OpenID Provider, built once for the tests that sign in at it; executorCmd
// the executor, for the test of the connections page against a real one.
var (
	opCmd       = testbin.New(testop.Package)
	executorCmd = testbin.New("github.com/verdictgate/verdict/cmd/executor")
)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	executorCmd.Remove()
	os.Exit(code)
}
