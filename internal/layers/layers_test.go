package layers

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

const module = "github.com/verdictgate/verdict/"

// rule is what a package must never depend on, directly or through another package.
type rule struct {
	pkg    string   // the package, relative to the module
	never  []string // packages (relative to the module) it must not depend on
	reason string
	// moduleOnly, when set, is the only non-standard packages it may depend on (relative to the
	// module, or a whole import path outside it); nil leaves them open.
	moduleOnly []string
}

var rules = []rule{
	{pkg: "executor", never: []string{"gates", "convstate", "approvals", "verdictd", "measure", "policytest", "mcpgate", "console", "askform"},
		reason: "the executor verifies and runs verdicts; the code that decides and signs them stays across the boundary"},
	{pkg: "mcpgate", never: []string{"gates", "convstate", "approvals", "verdictd", "executor", "store", "nonce", "vault", "measure", "console"},
		reason: "the gateway reaches verdictd and the executor only through their HTTP APIs, and holds no record, nonce or grant"},
	// The console may run the engine offline (the replay page decides recorded preflights again
	// in process), but never reaches the state, approvals or signing of a daemon.
	{pkg: "console", never: []string{"convstate", "approvals", "verdictd", "executor", "mcpgate", "nonce", "vault", "measure"},
		reason: "the console decides approvals through verdictd's API and reads records through the daemons' APIs"},
	{pkg: "verdictd", never: []string{"executor", "mcpgate", "console", "nonce", "vault", "upstreamauth"},
		reason: "verdictd decides and signs; it never holds a nonce, a user's grant or the executor's credentials"},
	{pkg: "gates", never: []string{"store", "convstate", "verdictd", "executor", "mcpgate", "console", "upstream", "measure"},
		reason: "the preflight engine does no I/O of its own: state, measurements and approvers come through its interfaces"},
	{pkg: "verdict", never: []string{"store", "nonce", "gates", "policy", "upstream"},
		reason: "the verdict's claims, signing and verification depend on keys and the wire types alone"},
	{pkg: "api", moduleOnly: []string{},
		reason: "the wire types stand on the standard library alone"},
	{pkg: "client", moduleOnly: []string{"api", "api/apijson", "github.com/go-json-experiment/json"},
		reason: "the daemons' Go client is the wire types, their codec and the standard library"},
}

// deps lists the packages outside the standard library that pkg depends on, itself excluded.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var ds []string
	for _, d := range strings.Fields(string(out)) {
		if d != module+pkg {
			ds = append(ds, d)
		}
	}
	return ds
}

// within reports whether path is p or a package under p.
func within(path, p string) bool { return path == p || strings.HasPrefix(path, p+"/") }

func TestTrustBoundaries(t *testing.T) {
	testtool.Path(t, "go", "go list reads the module's package graph")
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			for _, d := range deps(t, r.pkg) {
				for _, n := range r.never {
					if within(d, module+n) {
						t.Errorf("%s depends on %s: %s", r.pkg, strings.TrimPrefix(d, module), r.reason)
					}
				}
				if r.moduleOnly == nil {
					continue
				}
				allowed := false
				for _, a := range r.moduleOnly {
					if !strings.Contains(a, ".") {
						a = module + a
					}
					allowed = allowed || within(d, a)
				}
				if !allowed {
					t.Errorf("%s depends on %s: %s", r.pkg, d, r.reason)
				}
			}
		})
	}
}

// TestRulesNameRealPackages keeps the rules from going stale: a package renamed or removed
// would make its rule hold vacuously.
func TestRulesNameRealPackages(t *testing.T) {
	testtool.Path(t, "go", "go list reads the module's package graph")
	out, err := exec.Command("go", "list", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	real := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		real[strings.TrimPrefix(p, module)] = true
	}
	for _, r := range rules {
		for _, p := range append([]string{r.pkg}, r.never...) {
			if !real[p] {
				t.Errorf("rule of %s names %s, which is no package of the module", r.pkg, p)
			}
		}
	}
}
