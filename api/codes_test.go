package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// codeName is the name of a constant that holds a wire code, a reason or a _meta key.
var codeName = regexp.MustCompile(`^(Code|Reason|ExecutionReason|ReadReason|Meta)[A-Z]`)

// codeShape is how a code looks, unlike the sentences some Reason members hold.
var codeShape = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// errorCode is an error's text that reads like a code: words joined by underscores.
var errorCode = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)

func isCode(name, _ string) bool { return codeName.MatchString(name) }

// stringConsts returns the constants of the Go files of dir (tests left out) whose value is a
// string literal and that match selects by name and declared type (empty when untyped).
func stringConsts(t *testing.T, dir string, match func(name, typ string) bool) map[string]string {
	t.Helper()
	consts := map[string]string{}
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, n := range vs.Names {
					if i >= len(vs.Values) || !match(n.Name, typ) {
						continue
					}
					if v, ok := stringLit(vs.Values[i]); ok {
						consts[n.Name] = v
					}
				}
			}
		}
	}
	return consts
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// TestCodesDeclaredOnce holds each wire code, reason and _meta key to one constant of this
// package: two names for one code would let an emitter and a reader drift apart again.
func TestCodesDeclaredOnce(t *testing.T) {
	byValue := map[string][]string{}
	for name, v := range stringConsts(t, ".", isCode) {
		byValue[v] = append(byValue[v], name)
	}
	for v, names := range byValue {
		if len(names) > 1 {
			slices.Sort(names)
			t.Errorf("%q is declared as %v: declare it once", v, names)
		}
	}
}

// TestCodesDocumented holds every code the daemons can answer or record with to a row of a
// table of docs/api.md: this package's, the transport's (internal/httpx) and the verifiers'
// typed reasons (verdict, identity, nonce) and the execution store's, so that a new code
// without its documentation fails here.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range tick.FindAllStringSubmatch(line, -1) {
			documented[m[1]] = true
		}
	}
	typedReason := func(_, typ string) bool { return typ == "Reason" }
	sources := []struct {
		dir   string
		match func(name, typ string) bool
	}{
		{".", func(n, typ string) bool { return isCode(n, typ) || n == "GateDefinitionUnpinned" }},
		{filepath.Join("..", "internal", "httpx"), isCode},
		{filepath.Join("..", "verdict"), typedReason},
		{filepath.Join("..", "identity"), typedReason},
		{filepath.Join("..", "nonce"), isCode},
		{filepath.Join("..", "store"), isCode},
	}
	for _, src := range sources {
		for name, v := range stringConsts(t, src.dir, src.match) {
			if !documented[v] {
				t.Errorf("%s.%s (%q) is in no table of docs/api.md", pkgName(src.dir), name, v)
			}
		}
	}
}

// TestDaemonsDeclareNoCodes holds the daemons to this package's names: a code declared or
// written out in a daemon could be renamed there alone, and the daemon that reads it would
// fall back without a word.
func TestDaemonsDeclareNoCodes(t *testing.T) {
	for _, pkg := range []string{"mcpgate", "verdictd", "approvals", "executor", "console", "gates", "convstate", "waiting"} {
		dir := filepath.Join("..", pkg)
		for name, v := range stringConsts(t, dir, func(n, typ string) bool { return ast.IsExported(n) && isCode(n, typ) }) {
			t.Errorf("%s.%s = %q: declare it in package api", pkg, name, v)
		}
		for _, f := range parseDir(t, dir) {
			for name, from := range aliases(f) {
				t.Errorf("%s.%s = %s: name the code from its own package", pkg, name, from)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit := codeLiteral(n); lit != "" {
					t.Errorf("%s: the code %q is written out: name it from package api", pkg, lit)
				}
				return true
			})
		}
	}
}

// codeLiteral returns the string literal n writes as a code: the code of httpx.Errorf or of
// the gateway's toolError, a Code or Reason member of a composite literal, the text of an
// error that reads like a code (the gateway's and the waiting store's refusals are their
// errors' texts), or a literal _meta key of the project's.
func codeLiteral(n ast.Node) string {
	switch n := n.(type) {
	case *ast.CallExpr:
		arg := -1
		switch fun := n.Fun.(type) {
		case *ast.SelectorExpr:
			x, ok := fun.X.(*ast.Ident)
			switch {
			case ok && x.Name == "httpx" && fun.Sel.Name == "Errorf":
				arg = 1
			case ok && x.Name == "errors" && fun.Sel.Name == "New" && len(n.Args) == 1:
				if v, ok := stringLit(n.Args[0]); ok && errorCode.MatchString(v) {
					return v
				}
			}
		case *ast.Ident:
			if fun.Name == "toolError" {
				arg = 0
			}
		}
		if arg >= 0 && arg < len(n.Args) {
			if v, ok := stringLit(n.Args[arg]); ok {
				return v
			}
		}
	case *ast.KeyValueExpr:
		if k, ok := n.Key.(*ast.Ident); ok && (k.Name == "Code" || k.Name == "Reason") {
			if v, ok := stringLit(n.Value); ok && codeShape.MatchString(v) {
				return v
			}
		}
	case *ast.IndexExpr:
		if v, ok := stringLit(n.Index); ok && strings.HasPrefix(v, "io.verdict/") {
			return v
		}
	}
	return ""
}

func pkgName(dir string) string {
	if dir == "." {
		return "api"
	}
	return filepath.Base(dir)
}

// aliases returns the exported constants of f named like a code whose value is another
// package's constant: a second name for one code, which a reader may branch on while the
// emitter changes the first.
func aliases(f *ast.File) map[string]string {
	found := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) || !ast.IsExported(n.Name) || !codeName.MatchString(n.Name) {
					continue
				}
				if sel, ok := vs.Values[i].(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						found[n.Name] = x.Name + "." + sel.Sel.Name
					}
				}
			}
		}
	}
	return found
}
