package console

import (
	"os"
	"testing"

	"github.com/verdictgate/verdict/internal/testbin"
	"github.com/verdictgate/verdict/internal/testop"
)

// opCmd is the example OpenID Provider, built once for the tests that sign in at it.
var opCmd = testbin.New(testop.Package)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}
