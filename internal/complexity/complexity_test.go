package complexity

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
)

// exception is a function allowed over Max, and why.
type exception struct {
	dir, fn string // the package's directory from the module root, the function as gocyclo names it
	why     string
}

// exceptions are the functions allowed over Max: each transcribes a published rule table, one
// rule to a branch in the table's order, so that it can be read against the table. There are
// at most maxExceptions, and an entry whose function is gone or within the bound fails the test:
// the list only shrinks.
func exceptions() []exception {
	return []exception{
		{"gates", "asciiWordBoundary", "UAX #29's word boundary rules WB3 to WB13b, one case per rule"},
	}
}

const maxExceptions = 3

// root is the module's root, from this package's directory.
const root = "../.."

func TestComplexityBound(t *testing.T) {
	allowed := exceptions()
	if len(allowed) > maxExceptions {
		t.Errorf("%d exceptions, at most %d", len(allowed), maxExceptions)
	}
	over := map[exception]bool{}
	for _, s := range analyze(t) {
		if s.Complexity <= Max {
			continue
		}
		rel, err := filepath.Rel(root, s.Pos.Filename)
		if err != nil {
			t.Fatal(err)
		}
		key := exception{dir: filepath.ToSlash(filepath.Dir(rel)), fn: s.FuncName}
		over[key] = true
		i := slices.IndexFunc(allowed, func(e exception) bool { return e.dir == key.dir && e.fn == key.fn })
		if i >= 0 {
			t.Logf("%s %s is over %d (%d), allowed: %s", key.dir, key.fn, Max, s.Complexity, allowed[i].why)
		} else {
			t.Errorf("%s:%d: %s has cyclomatic complexity %d, over %d: split it into functions that each do one thing",
				filepath.ToSlash(rel), s.Pos.Line, s.FuncName, s.Complexity, Max)
		}
	}
	for _, e := range allowed {
		if !over[exception{dir: e.dir, fn: e.fn}] {
			t.Errorf("the exception of %s %s is stale: no such function is over %d", e.dir, e.fn, Max)
		}
	}
}

// analyze returns the complexity of every function of the module's non-test Go files: those the
// go command builds under some build tags, so testdata, vendor and directories whose name
// starts with . or _ are left out, as are other modules nested in this one. A file that does
// not parse fails the test, and so does a //gocyclo:ignore directive: the exceptions are named
// in this file alone.
func analyze(t *testing.T) gocyclo.Stats {
	t.Helper()
	fset := token.NewFileSet()
	var stats gocyclo.Stats
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && skipDir(path, name) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//gocyclo:") {
					t.Errorf("%s: %s: name an exception in internal/complexity instead", fset.Position(c.Pos()), c.Text)
				}
			}
		}
		stats = gocyclo.AnalyzeASTFile(f, fset, stats)
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A walk that found next to nothing started from the wrong place.
	if files < 100 {
		t.Fatalf("analyzed %d files under %s: expected the whole module", files, root)
	}
	return stats
}

// skipDir says whether the go command leaves the directory out of the module: testdata, vendor,
// a name starting with . or _, or the root of another module.
func skipDir(path, name string) bool {
	if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}
