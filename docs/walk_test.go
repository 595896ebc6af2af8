// Package docs_test walks the pages' runnable examples. A page marks the blocks a reader is asked
// to run; the test runs them in order, in a fresh clone of the repository, the way a reader runs
// them in one terminal, and checks what they print and what the daemons recorded. A page whose
// commands stop working fails its walk, so the page cannot drift from the code.
//
// The marker is an HTML comment on the line before a fenced block (development.md, "Walked
// pages"):
//
//	<!-- walk: NAME -->            the sh block that follows is run
//	<!-- walk: NAME file=PATH -->  the block that follows is saved as PATH, as the page tells
//	                               the reader to save it
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// A block is one marked block of a page.
type block struct {
	line int    // the line of its opening fence, 1-based
	lang string // the fence's info string
	file string // with file=, where the reader saves it; empty for a block that is run
	text string
}

var markerRE = regexp.MustCompile(`^<!-- walk: ([a-z0-9-]+)(?: file=(\S+))? -->$`)

// walkBlocks returns the blocks of page marked for the walk name, in order. A marker that is
// not followed by a fence, a run block that is not sh, a file outside the working directory
// and a fence left open are errors: a marker that marks nothing would let a block drift
// unnoticed.
func walkBlocks(page, name string) ([]block, error) {
	lines := strings.Split(page, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "```") {
			// An unmarked fenced block: what it holds is text, a marker shown as an example
			// included.
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			continue
		}
		if !strings.HasPrefix(line, "<!-- walk:") {
			continue
		}
		m := markerRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: malformed walk marker %q (want <!-- walk: NAME --> or <!-- walk: NAME file=PATH -->)", i+1, line)
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return nil, fmt.Errorf("line %d: walk marker not followed by a fenced block on the next line", i+1)
		}
		b := block{line: i + 2, lang: strings.TrimSpace(strings.TrimPrefix(lines[i+1], "```")), file: m[2]}
		if b.file == "" && b.lang != "sh" {
			return nil, fmt.Errorf("line %d: a block to run must be sh, not %q", b.line, b.lang)
		}
		if b.file != "" && (filepath.IsAbs(b.file) || !filepath.IsLocal(b.file)) {
			return nil, fmt.Errorf("line %d: file=%s is not a relative path inside the working directory", i+1, b.file)
		}
		end := i + 2
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: fenced block never closed", b.line)
		}
		b.text = strings.Join(lines[i+2:end], "\n") + "\n"
		if m[1] == name {
			blocks = append(blocks, b)
		}
		i = end
	}
	return blocks, nil
}

// shellInfo holds the info strings of blocks a reader runs in a shell.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true}

// unmarked returns the lines of the shell blocks under heading (up to the next heading of the
// same level) that no walk marker for name precedes: commands the page asks a reader to run
// that the walk would not.
func unmarked(page, heading, name string) ([]int, error) {
	lines := strings.Split(page, "\n")
	level := heading[:strings.IndexByte(heading, ' ')+1]
	start := -1
	for i, l := range lines {
		if l == heading {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	var out []int
	inFence := false
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if !inFence && strings.HasPrefix(l, level) {
			break
		}
		// A fence may be indented (in a list item): it is a block all the same.
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "```") {
			continue
		}
		if inFence {
			inFence = false
			continue
		}
		inFence = true
		// Any block a reader would paste into a shell needs a marker, whatever its info
		// string calls the shell; a marked one must then be sh (walkBlocks).
		info, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(t, "```")), " ")
		if !shellInfo[info] {
			continue
		}
		m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1]))
		if m == nil || m[1] != name || m[2] != "" {
			out = append(out, i+1)
		}
	}
	return out, nil
}

func TestWalkBlocks(t *testing.T) {
	for _, c := range []struct {
		name, page string
		want       []block
		err        string
	}{
		{"run and file", "text\n<!-- walk: w -->\n```sh\necho a\n```\n<!-- walk: w file=tmp/a.json -->\n```json\n{}\n```\n",
			[]block{{3, "sh", "", "echo a\n"}, {7, "json", "tmp/a.json", "{}\n"}}, ""},
		{"other walks left out", "<!-- walk: v -->\n```sh\necho v\n```\n<!-- walk: w -->\n```sh\necho w\n```\n",
			[]block{{6, "sh", "", "echo w\n"}}, ""},
		{"unmarked block left out", "```sh\necho a\n```\n", nil, ""},
		{"marker shown in a block", "```text\n<!-- walk: w -->\n```\n", nil, ""},
		{"blank line after marker", "<!-- walk: w -->\n\n```sh\necho a\n```\n", nil, "not followed by a fenced block"},
		{"run block not sh", "<!-- walk: w -->\n```json\n{}\n```\n", nil, "must be sh"},
		{"file outside", "<!-- walk: w file=../x -->\n```json\n{}\n```\n", nil, "not a relative path"},
		{"file absolute", "<!-- walk: w file=/tmp/x -->\n```json\n{}\n```\n", nil, "not a relative path"},
		{"malformed", "<!-- walk: w, file=x -->\n```sh\n```\n", nil, "malformed walk marker"},
		{"open fence", "<!-- walk: w -->\n```sh\necho a\n", nil, "never closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := walkBlocks(c.page, "w")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestUnmarked(t *testing.T) {
	page := "## A\n<!-- walk: w -->\n```sh\na\n```\n```sh\nb\n```\n```text\nc\n```\n" +
		"### sub\n<!-- walk: w file=x -->\n```sh\nd\n```\n```bash\nf\n```\n- item\n  ```sh\n  g\n  ```\n" +
		"## B\n```sh\ne\n```\n"
	got, err := unmarked(page, "## A", "w")
	if err != nil {
		t.Fatal(err)
	}
	// 6: no marker; 14: a file= marker saves, it does not run; 17: bash is a shell too; 21: an
	// indented fence is a block.
	if want := []int{6, 14, 17, 21}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("unmarked lines %v, want %v", got, want)
	}
}

// localStackPorts are the loopback ports the example configs listen on.
var localStackPorts = []string{"127.0.0.1:8780", "127.0.0.1:8781", "127.0.0.1:8790", "127.0.0.1:8792"}

// TestOperationsLocalStack walks "A local stack" of operations.md: build, keys, the four
// processes, a preflight with curl (sent again: new_request keeps it from ending exhausted), a
// gated call from the TypeScript SDK host through mcpgate, twice, and the audit; then it stops
// the stack as the page says.
//
// The walk runs in a clone of this repository's HEAD (git clone --shared), so that nothing
// ignored or generated in the working tree (bin/, tmp/, node_modules/) helps it along. Changes
// to tracked files not yet committed are applied to the clone (git diff HEAD), so a page or
// script being edited is walked as it stands; files git does not track yet are not in the clone,
// and the test names them.
func TestOperationsLocalStack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the walk builds and runs the whole stack")
	}
	for _, tool := range []string{"node", "npm"} {
		testtool.Path(t, tool, "the local stack's MCP host runs on Node.js")
	}
	for _, tool := range []string{"bash", "git", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the local stack of operations.md uses it", tool)
		}
	}
	for _, addr := range localStackPorts {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the local stack listens on %s, which is taken: %v", addr, err)
		}
		ln.Close()
	}

	dir := clone(t)
	blocks := pageWalk(t, dir, "operations.md", "## A local stack", "local-stack")

	// Checks run right after the block whose text holds their key, while the stack is up. Each
	// key must name exactly one block: a page that changed its blocks must change these too.
	var records []string // decision and execution record ids of the host's calls, in pairs
	checks := map[string]func(t *testing.T, sh *shell, b block, out string){
		"8792/readyz": func(t *testing.T, _ *shell, _ block, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || strings.Count(out, `"status":"ready"`) != 3 {
				t.Fatalf("the three daemons did not all say ready:\n%s", out)
			}
		},
		"/v1/preflight": func(t *testing.T, sh *shell, b block, out string) {
			checkPreflight(t, out)
			// Sent again, the request asks again, its first ask again: new_request cleared
			// the conversation's counters (else this would be the second ask, and the third
			// run would end exhausted).
			checkPreflight(t, sh.run(t, b, "again"))
		},
		"to_account=110-222-333": func(t *testing.T, _ *shell, _ block, out string) {
			records = append(records, checkCall(t, out, "Please give the account to credit.", "user_answer")...)
		},
		"to_account=keep": func(t *testing.T, _ *shell, _ block, out string) {
			records = append(records, checkCall(t, out, "Last time the to account was: 110-222-333", "prior_state")...)
		},
		"verdictd audit": func(t *testing.T, _ *shell, _ block, out string) {
			for _, want := range []string{`verdict_issued\s+2\n`, `executed\s+2\n`, `issued and executed\s+2\n`, `clean: no anomaly`} {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("the audit printed no %q:\n%s", want, out)
				}
			}
		},
		"kill $(jobs -p)": func(t *testing.T, sh *shell, _ block, _ string) {
			// -r: the jobs still running; one that ended may stay listed as Done until the
			// shell reports it.
			if left := sh.run(t, block{text: "jobs -lr\n"}, "jobs"); strings.TrimSpace(left) != "" {
				t.Errorf("processes left running after the page stopped the stack: %s", left)
			}
		},
	}
	found := map[string]int{}
	for _, b := range blocks {
		for key := range checks {
			if b.file == "" && strings.Contains(b.text, key) {
				found[key]++
			}
		}
	}
	for key := range checks {
		if found[key] != 1 {
			t.Fatalf("operations.md: %d blocks of the local-stack walk hold %q, want 1", found[key], key)
		}
	}

	// npm installs from its cache when that holds the pinned packages, and retries a fetch, as
	// ./scripts/test does: a network hiccup is not a failed walk.
	//
	// The build cache keys a package compiled without -trimpath by its directory, so a clone in
	// a new directory would compile the whole module again on every walk; with -trimpath the
	// walks after the first find it in the cache. The binaries differ only in the file names
	// their stack traces print.
	sh := startShell(t, dir, "operations.md", "npm_config_prefer_offline=true", "npm_config_fetch_retries=5",
		"npm_config_audit=false", "npm_config_fund=false",
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
	for _, b := range blocks {
		if b.file != "" {
			save(t, dir, b)
			continue
		}
		out := sh.run(t, b, "")
		for key, check := range checks {
			if strings.Contains(b.text, key) {
				check(t, sh, b, out)
			}
		}
	}
	sh.close(t)

	if len(records) != 4 {
		t.Fatalf("record ids %v, want two calls' decision and execution records", records)
	}
	checkLedger(t, filepath.Join(dir, "tmp", "bank.json"))
}

// pageWalk reads docs/<page> in dir and returns its blocks marked for the walk name, after
// checking that every shell block of the section under heading carries the marker: a command
// the page shows must be walked.
func pageWalk(t *testing.T, dir, page, heading, name string) []block {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := unmarked(string(text), heading, name)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(lines) > 0 {
		t.Fatalf("%s: the shell blocks at lines %v of %q carry no <!-- walk: %s --> marker, so the walk would not run them",
			page, lines, heading, name)
	}
	blocks, err := walkBlocks(string(text), name)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no block is marked for the walk %s", page, name)
	}
	return blocks
}

// save writes a file= block where the page tells the reader to save it.
func save(t *testing.T, dir string, b block) {
	t.Helper()
	path := filepath.Join(dir, b.file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// clone makes a clone of the repository this test runs in, with the uncommitted changes to
// tracked files applied, and returns its directory.
func clone(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the walk clones the repository, and this is not a git work tree: %v", err)
	}
	src := strings.TrimSpace(string(root))
	dir := filepath.Join(t.TempDir(), "verdict")
	git := func(in []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	git(nil, "clone", "--quiet", "--shared", src, dir)
	if diff := git(nil, "-C", src, "diff", "--binary", "HEAD"); len(diff) > 0 {
		git(diff, "-C", dir, "apply", "--binary", "-")
		t.Log("walking HEAD with the working tree's uncommitted changes to tracked files")
	}
	if untracked := git(nil, "-C", src, "ls-files", "--others", "--exclude-standard"); len(untracked) > 0 {
		t.Logf("not in the clone, as git does not track them yet:\n%s", untracked)
	}
	return dir
}

// A shell is one bash, fed the page's blocks one at a time on its standard input, as a reader
// pastes them into one terminal: what a block starts in the background stays a job of that
// shell, and later blocks (and its exit) can stop it.
type shell struct {
	cmd    *exec.Cmd
	stdin  *os.File
	status *bufio.Scanner
	dir    string
	page   string // the page whose blocks it runs, for the errors
	logs   string // each block's output, and the shell's own
	n      int
}

// startShell starts bash in dir with -e and pipefail: a command that fails ends the shell, and
// with it the walk, at the block that holds it. On exit, however it comes, the shell stops its
// background jobs and waits for them (the EXIT trap), so a failed walk leaves no daemon behind.
// The shell has this process's environment and env; page names the page in its errors.
func startShell(t *testing.T, dir, page string, env ...string) *shell {
	t.Helper()
	logs := t.TempDir()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Create(filepath.Join(logs, "shell"))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	// A deadline only so that a hung block ends the test with its output rather than at the
	// test binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-o", "pipefail")
	cmd.Dir = dir
	cmd.Stdin = stdinR
	cmd.Stdout, cmd.Stderr = own, own
	cmd.ExtraFiles = []*os.File{statusW} // fd 3: the shell says which block it finished
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	statusW.Close()
	t.Cleanup(func() {
		// The shell's background jobs share its process group. On a walk that ended normally
		// they are gone; after a failure this stops whatever the EXIT trap did not reach.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stdinW.Close()
		cmd.Wait()
		statusR.Close()
	})
	sh := &shell{cmd: cmd, stdin: stdinW, status: bufio.NewScanner(statusR), dir: dir, page: page, logs: logs}
	sh.write(t, "trap 'set +e; kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	return sh
}

func (sh *shell) write(t *testing.T, s string) {
	t.Helper()
	if _, err := sh.stdin.WriteString(s); err != nil {
		t.Fatalf("writing to the shell: %v", err)
	}
}

// run runs b in the shell and returns what it printed. A block that fails fails the test with
// its text, its output and the ends of the daemons' logs. Its commands read nothing from the
// shell's input, and cannot write to the status pipe.
func (sh *shell) run(t *testing.T, b block, label string) string {
	t.Helper()
	sh.n++
	where := fmt.Sprintf("line %d", b.line)
	if label != "" {
		where += " (" + label + ")"
	}
	start := time.Now()
	defer func() { t.Logf("block at %s: %s", where, time.Since(start).Round(time.Millisecond)) }()
	out := filepath.Join(sh.logs, strconv.Itoa(sh.n))
	sh.write(t, fmt.Sprintf("{\n%s} </dev/null >%q 2>&1 3>&-\necho %d >&3\n", b.text, out, sh.n))
	ok := sh.status.Scan() && sh.status.Text() == strconv.Itoa(sh.n)
	text, _ := os.ReadFile(out)
	if !ok {
		sh.stdin.Close()
		err := sh.cmd.Wait()
		own, _ := os.ReadFile(filepath.Join(sh.logs, "shell"))
		t.Fatalf("%s, block at %s failed (%v):\n%s\n--- its output:\n%s%s%s", sh.page, where, err, b.text, text, own, sh.daemonLogs())
	}
	return string(text)
}

// close ends the shell's input; it must exit 0.
func (sh *shell) close(t *testing.T) {
	t.Helper()
	sh.stdin.Close()
	if err := sh.cmd.Wait(); err != nil {
		own, _ := os.ReadFile(filepath.Join(sh.logs, "shell"))
		t.Fatalf("the shell ended with %v:\n%s", err, own)
	}
}

// daemonLogs returns the end of every log the page's daemons write under tmp/.
func (sh *shell) daemonLogs() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(sh.dir, "tmp", "*.log"))
	for _, l := range logs {
		text, _ := os.ReadFile(l)
		if len(text) > 4096 {
			text = text[len(text)-4096:]
		}
		fmt.Fprintf(&b, "\n--- %s:\n%s", filepath.Base(l), text)
	}
	return b.String()
}

// checkPreflight checks the answer to the worked example's first request: a question for the
// account, asked for the first time in this request, the e-mail's account rejected.
func checkPreflight(t *testing.T, out string) {
	t.Helper()
	var rec struct {
		Outcome      string `json:"outcome"`
		UnknownCount int    `json:"unknown_count"`
		Slots        []struct {
			SlotID   string `json:"slot_id"`
			Asks     int    `json:"asks"`
			Rejected []struct {
				Reason string `json:"reason"`
			} `json:"rejected_candidates"`
		} `json:"slots"`
		Questions []struct {
			SlotID string `json:"slot_id"`
		} `json:"questions"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("the preflight printed %q: %v", out, err)
	}
	if rec.Outcome != "ask_user" || rec.UnknownCount != 3 || len(rec.Questions) != 1 || rec.Questions[0].SlotID != "to_account" {
		t.Fatalf("the preflight answered outcome %q, unknown_count %d, questions %+v; want ask_user, 3, one for to_account:\n%s",
			rec.Outcome, rec.UnknownCount, rec.Questions, out)
	}
	for _, s := range rec.Slots {
		if s.SlotID != "to_account" {
			continue
		}
		if s.Asks != 1 {
			t.Errorf("to_account asked %d times in this request, want 1 (new_request clears the count)", s.Asks)
		}
		if len(s.Rejected) != 1 || s.Rejected[0].Reason != "untrusted_segment" {
			t.Errorf("to_account's rejected candidates %+v, want the e-mail's, untrusted_segment", s.Rejected)
		}
		return
	}
	t.Errorf("no to_account slot in the record:\n%s", out)
}

var metaLineRE = regexp.MustCompile(`(?m)^io\.verdict/(record_id|execution_record): "([^"]+)"$`)

// checkCall checks what the host printed for one gated call (the form it asked first holds
// firstAsk, the e-mail's account is shown nowhere, the transfer ran), and that verdictd issued
// a verdict whose values came from the sources the page describes (the account answered by
// the user, first offered from accountOrigin) and the executor executed it. It returns the ids
// of the two records.
func checkCall(t *testing.T, out, firstAsk, accountOrigin string) []string {
	t.Helper()
	form1, _, _ := strings.Cut(out, "--- form 2")
	if !strings.Contains(form1, firstAsk) {
		t.Errorf("the first form does not say %q:\n%s", firstAsk, out)
	}
	if strings.Contains(out, "999-888-777") {
		t.Errorf("the user was shown the e-mail's account:\n%s", out)
	}
	if !strings.Contains(out, "transferred 500000 from 1102534471 to 110-222-333") {
		t.Fatalf("the host's call did not transfer:\n%s", out)
	}
	ids := map[string]string{}
	for _, m := range metaLineRE.FindAllStringSubmatch(out, -1) {
		ids[m[1]] = m[2]
	}
	rid, eid := ids["record_id"], ids["execution_record"]
	if rid == "" || eid == "" {
		t.Fatalf("the result's _meta names no decision or execution record:\n%s", out)
	}

	ctx := t.Context()
	v, err := client.New("http://127.0.0.1:8780", client.WithAdminToken("example-admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := v.Record(ctx, rid, false)
	if err != nil {
		t.Fatalf("decision record %s: %v", rid, err)
	}
	var rec struct {
		Outcome   string  `json:"outcome"`
		VerdictID *string `json:"verdict_id"`
		Slots     []struct {
			SlotID string  `json:"slot_id"`
			Source *string `json:"source"`
			Origin *string `json:"origin_source"`
		} `json:"slots"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != "verdict_issued" || rec.VerdictID == nil {
		t.Fatalf("decision record %s: outcome %q, want verdict_issued:\n%s", rid, rec.Outcome, raw)
	}
	got := map[string]string{}
	for _, s := range rec.Slots {
		if s.Source != nil && s.Origin != nil {
			got[s.SlotID] = *s.Source + " from " + *s.Origin
		}
	}
	for slot, want := range map[string]string{
		"amount":       "instruction from instruction",
		"from_account": "pre_set_data from pre_set_data",
		"memo":         "reviewed_draft from reviewed_draft",
		"to_account":   "user_answer from " + accountOrigin,
	} {
		if got[slot] != want {
			t.Errorf("decision record %s: %s is %q, want %q (source from origin_source)", rid, slot, got[slot], want)
		}
	}

	x, err := client.New("http://127.0.0.1:8781", client.WithAdminToken("example-admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err = x.Execution(ctx, eid)
	if err != nil {
		t.Fatalf("execution record %s: %v", eid, err)
	}
	var exe struct {
		Decision  string  `json:"execution_decision"`
		VerdictID *string `json:"verdict_id"`
	}
	if err := json.Unmarshal(raw, &exe); err != nil {
		t.Fatal(err)
	}
	if exe.Decision != "executed" || exe.VerdictID == nil || *exe.VerdictID != *rec.VerdictID {
		t.Errorf("execution record %s: %s of verdict %v, want executed of %s:\n%s", eid, exe.Decision, exe.VerdictID, *rec.VerdictID, raw)
	}
	return []string{rid, eid}
}

// checkLedger checks the bank's ledger: the two calls moved the rent twice, with the reviewed
// memo, and nothing else moved.
func checkLedger(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ledger struct {
		Transactions []struct {
			Status string `json:"status"`
			From   string `json:"from_account"`
			To     string `json:"to_account"`
			Amount int64  `json:"amount"`
			Memo   string `json:"memo"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(b, &ledger); err != nil {
		t.Fatal(err)
	}
	if len(ledger.Transactions) != 2 {
		t.Fatalf("the bank holds %d transactions, want 2:\n%s", len(ledger.Transactions), b)
	}
	for _, tx := range ledger.Transactions {
		if tx.Status != "completed" || tx.From != "1102534471" || tx.To != "110-222-333" || tx.Amount != 500000 || tx.Memo != "Rent for December" {
			t.Errorf("transaction %+v, want 500000 from 1102534471 to 110-222-333, memo %q", tx, "Rent for December")
		}
	}
}
