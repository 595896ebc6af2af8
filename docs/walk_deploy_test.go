package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// TestDeployChartOffline walks "Checking the chart offline" of deploy.md in a fresh clone: the
// values file the page gives, then helm lint --strict and helm template with --kube-version, as
// a reader runs them before anything reaches a cluster; then it checks what was rendered. The
// section that follows, installing into a cluster, needs one and is not walked; the chart's own
// tests (deploy/) check what it renders in depth.
func TestDeployChartOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the walk builds helm and renders the chart")
	}
	for _, tool := range []string{"bash", "git", "go"} {
		testtool.Path(t, tool, "the chart walk of deploy.md runs it")
	}
	dir := clone(t)
	blocks := pageWalk(t, dir, "deploy.md", "### Checking the chart offline", "chart")
	// GOFLAGS empty, as the chart tests' go install of helm has it, so that the page's go run
	// of helm finds helm's packages in the build cache.
	sh := startShell(t, dir, "deploy.md", "GOFLAGS=")
	ran := 0
	for _, b := range blocks {
		if b.file != "" {
			save(t, dir, b)
			continue
		}
		sh.run(t, b, "")
		ran++
	}
	sh.close(t)
	if ran == 0 {
		t.Fatal("deploy.md: no block of the chart walk ran")
	}

	rendered, err := os.ReadFile(filepath.Join(dir, "rendered.yaml"))
	if err != nil {
		t.Fatalf("the page's helm template wrote no rendered.yaml: %v", err)
	}
	for _, want := range []string{
		`(?m)^kind: NetworkPolicy$`,
		`image: "?ghcr\.io/verdictgate/verdictd:`,
		`image: "?ghcr\.io/verdictgate/executor:`,
		// The values file's tool server reached the executor's config.
		`https://bank\.internal\.example/mcp`,
	} {
		if !regexp.MustCompile(want).Match(rendered) {
			t.Errorf("rendered.yaml holds no %s", want)
		}
	}
}
