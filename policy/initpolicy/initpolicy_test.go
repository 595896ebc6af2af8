package initpolicy_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testtool"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/policy/initpolicy"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdictd"
)

// bankCmd is the examples/bank server, built on first use.
var bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")

func TestMain(m *testing.M) {
	code := m.Run()
	bankCmd.Remove()
	os.Exit(code)
}

// servers writes a policy file that declares the servers a policy is written for, and loads it.
func servers(t *testing.T, doc string) (string, *policy.Policy) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "servers.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, p
}

// initAndCheck lists the servers of the policy at path, writes their policy, and checks what
// every policy it writes must be: check-policy, listing the servers again, finds no problem and
// warns of nothing; every listed tool has an entry, classed irreversible (gated, the class of a
// tool nothing was decided of) with no actions or approver, so that no call is approved until a
// person classes it; each of its arguments is a field with the default cascade; and the pins hold
// every tool, each server whole, to its definition as listed.
func initAndCheck(t *testing.T, path string, p *policy.Policy) (*policy.Policy, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	listed, err := initpolicy.List(ctx, p, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out, problems, err := initpolicy.Write(p, listed, path)
	if err != nil || len(problems) > 0 {
		t.Fatalf("Write: %v %v", err, problems)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := verdictd.CheckPolicy(ctx, file, verdictd.CheckOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 || len(rep.Warnings) > 0 {
		t.Fatalf("check-policy of the written policy: problems %v, warnings %v\n%s", rep.Problems, rep.Warnings, out)
	}
	got, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for id, tools := range listed {
		if len(tools) == 0 {
			t.Fatalf("server %s listed no tools", id)
		}
		pin := got.Pins[id]
		if pin == nil || !pin.All || len(pin.Tools) != len(tools) {
			t.Errorf("server %s: pins %+v for %d tools", id, pin, len(tools))
		}
		for _, tl := range tools {
			pt := got.Tool(id, tl.Name)
			if pt == nil {
				t.Errorf("%s/%s: no entry", id, tl.Name)
				continue
			}
			if pt.EffectiveClass() != policy.Irreversible || pt.Class != policy.Irreversible || len(pt.Actions) > 0 || pt.Approver != nil {
				t.Errorf("%s/%s: class %q, actions %q, approver %v: want gated, and approved by nothing", id, tl.Name, pt.Class, pt.Actions, pt.Approver)
			}
			if err := got.CheckPin(id, tl.Name, tl.Digest); err != nil || pin.Tools[tl.Name] != tl.Digest {
				t.Errorf("%s/%s: pin: %v", id, tl.Name, err)
			}
			for name, f := range pt.Fields {
				if !slices.Equal(f.AllowedSources, policy.Cascade()) || f.Confirm || f.Question != "" {
					t.Errorf("%s/%s: field %s: %+v, want the default cascade", id, tl.Name, name, f)
				}
			}
			if len(pt.Drafted) > 0 {
				t.Errorf("%s/%s: drafted %q: drafted is only ever proposed", id, tl.Name, pt.Drafted)
			}
		}
	}
	return got, string(out)
}

// fields returns the names of a tool entry's fields, sorted.
func fields(pt *policy.Tool) []string { return slices.Sorted(maps.Keys(pt.Fields)) }

func TestExampleBank(t *testing.T) {
	argv, _ := json.Marshal([]string{bankCmd.Path(t), "--state", filepath.Join(t.TempDir(), "bank.json")})
	path, p := servers(t, `policy_version: "bank-init.1"
servers:
  bank:
    audience: ["executor-bank"]
    tools_from: {command: `+string(argv)+`}
`)
	got, out := initAndCheck(t, path, p)
	if names := slices.Sorted(maps.Keys(got.Tools)); !slices.Equal(names, []string{"bank/get_balance", "bank/list_transactions", "bank/schedule_transfer", "bank/transfer"}) {
		t.Fatalf("tools %q", names)
	}
	if f := fields(got.Tool("bank", "transfer")); !slices.Equal(f, []string{"amount", "from_account", "memo", "to_account"}) {
		t.Errorf("transfer's fields %q", f)
	}
	for _, want := range []string{
		// The server's own words and hints, as comments.
		"    # Move money from one account to another, immediately.\n",
		"    #   readOnlyHint: true\n",
		"    #   destructiveHint: true\n",
		// The memo is free text; the accounts are bounded to an identifier's length, and
		// from_account is the tool's [Required].
		"    # drafted: [memo]\n",
		"      # Account to debit. [Required] by the tool: never the user's bare answer.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the policy lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "# drafted: [memo]\n") != 2 || strings.Contains(out, "drafted: [from_account") || strings.Contains(out, "to_account]") {
		t.Errorf("drafted proposals:\n%s", out)
	}
}

func TestFilesystemServer(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		testtool.Missing(t, "npx not found: "+err.Error())
	}
	root := t.TempDir()
	server := []string{npx, "-y", "@modelcontextprotocol/server-filesystem", root}
	// The first use downloads the package; it is not part of a listing's bound.
	warm, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(warm, server[0], server[1:]...).CombinedOutput(); err != nil {
		testtool.Missing(t, "npx could not run the filesystem server: "+err.Error()+": "+string(out))
	}
	argv, _ := json.Marshal(server)
	path, p := servers(t, `policy_version: "fs-init.1"
servers:
  fs:
    audience: ["executor-fs"]
    tools_from: {command: `+string(argv)+`}
`)
	got, out := initAndCheck(t, path, p)
	for _, name := range []string{"read_text_file", "write_file", "list_allowed_directories"} {
		if got.Tool("fs", name) == nil {
			t.Errorf("no entry for fs/%s", name)
		}
	}
	if f := fields(got.Tool("fs", "write_file")); !slices.Equal(f, []string{"content", "path"}) {
		t.Errorf("write_file's fields %q", f)
	}
	// read_text_file says it only reads; it is gated all the same.
	if !strings.Contains(out, "  fs/read_text_file:\n") || !strings.Contains(out, "    #   readOnlyHint: true\n") {
		t.Errorf("read_text_file's annotations are not shown:\n%s", out)
	}
}

// hint is an annotation value: anything JSON holds, the hints' booleans most often.
func hint() *rapid.Generator[any] {
	scalar := rapid.OneOf(
		rapid.Just[any](true), rapid.Just[any](false), rapid.Just[any](nil),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(n int64) any { return n }),
	)
	return rapid.OneOf(scalar,
		rapid.Map(rapid.SliceOfN(scalar, 0, 3), func(v []any) any { return v }),
		rapid.Map(rapid.MapOfN(rapid.String(), scalar, 0, 3), func(v map[string]any) any { return v }))
}

// No annotation changes what the policy decides: whatever a server says of its tools — the
// hints of the MCP specification with any values, any other key, text made to look like policy
// — the written policy reads as the one written for the same tools without annotations (every
// tool gated, the same fields, the same pins), and differs from it in comment lines only.
func TestAnnotationsDecideNothing(t *testing.T) {
	_, p := servers(t, "policy_version: v1\nservers:\n  bank: {audience: [e], tools_from: {url: \"http://127.0.0.1:1/mcp\"}}\n")
	saved, err := initpolicy.ReadSaved("testdata/saved", p)
	if err != nil {
		t.Fatal(err)
	}
	bare := slices.Clone(saved["bank"])
	for i := range bare {
		bare[i] = redefine(t, bare[i], nil)
	}
	base, _, err := initpolicy.Write(p, map[string][]upstream.Tool{"bank": bare}, "servers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := policy.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	hints := []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title"}
	keys := rapid.OneOf(rapid.SampledFrom(hints), rapid.String(), rapid.Just("x\nclass: read"), rapid.Just("\u202eclass: read"))
	rapid.Check(t, func(t *rapid.T) {
		tools := slices.Clone(bare)
		for i := range tools {
			switch rapid.IntRange(0, 2).Draw(t, "annotations") {
			case 1:
				// The specification's hints, each absent, a boolean or anything, and other keys.
				ann := rapid.MapOfN(keys, hint(), 0, 3).Draw(t, "others")
				for _, h := range hints {
					switch rapid.IntRange(0, 2).Draw(t, h) {
					case 1:
						ann[h] = rapid.Bool().Draw(t, h+" value")
					case 2:
						ann[h] = hint().Draw(t, h+" value")
					}
				}
				tools[i] = redefine(t, tools[i], ann)
			case 2:
				tools[i] = redefine(t, tools[i], hint().Draw(t, "not an object"))
			}
		}
		out, problems, err := initpolicy.Write(p, map[string][]upstream.Tool{"bank": tools}, "servers.yaml")
		if err != nil || len(problems) > 0 {
			t.Fatalf("Write: %v %v", err, problems)
		}
		got, err := policy.Parse(out)
		if err != nil {
			t.Fatalf("the written policy does not load: %v\n%s", err, out)
		}
		for k, pt := range got.Tools {
			if pt.EffectiveClass() != policy.Irreversible {
				t.Fatalf("%s: class %q\n%s", k, pt.EffectiveClass(), out)
			}
		}
		if !reflect.DeepEqual(got.Tools, want.Tools) || !reflect.DeepEqual(got.Pins, want.Pins) {
			t.Fatalf("the annotations changed the policy\n%s", out)
		}
		if a, b := uncommented(string(out)), uncommented(string(base)); a != b {
			t.Fatalf("the annotations changed more than comments:\n%s", initpolicy.Diff("without", []byte(b), "with", []byte(a)))
		}
	})
}

// redefine returns tl listed again with annotations ann (none when nil).
func redefine(t interface{ Fatal(...any) }, tl upstream.Tool, ann any) upstream.Tool {
	var def map[string]json.RawMessage
	if err := json.Unmarshal(tl.Raw, &def); err != nil {
		t.Fatal(err)
	}
	delete(def, "annotations")
	if ann != nil {
		raw, err := json.Marshal(ann)
		if err != nil {
			t.Fatal(err)
		}
		def["annotations"] = raw
	}
	raw, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	out := upstream.ParseTools(tl.Server, []json.RawMessage{raw})[0]
	if out.Err != nil || out.Digest != tl.Digest {
		t.Fatal("annotations changed the definition:", out.Err)
	}
	return out
}

// uncommented is text without its comment lines and trailing comments.
func uncommented(text string) string {
	var b strings.Builder
	for l := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		l, _, _ = strings.Cut(l, "   # ")
		b.WriteString(strings.TrimRight(l, " \n") + "\n")
	}
	return b.String()
}

// Saved answers are read as a listing is, from the result or the whole response; anything that
// is not one server's whole answer is refused, naming the file.
func TestReadSaved(t *testing.T) {
	_, p := servers(t, `policy_version: v1
servers:
  bank: {audience: [e], tools_from: {url: "http://127.0.0.1:1/mcp"}}
  inline: {audience: [e], tools: [{name: ping, inputSchema: {type: object}}]}
`)
	const tools = `[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"}}]`
	tests := []struct {
		name  string
		files map[string]string
		want  string // an error's text; "" reads tools a and b
	}{
		{"result", map[string]string{"bank.json": `{"tools":` + tools + `}`}, ""},
		{"response", map[string]string{"bank.json": `{"jsonrpc":"2.0","id":2,"result":{"tools":` + tools + `,"nextCursor":null}}`}, ""},
		{"other files", map[string]string{"bank.json": `{"tools":` + tools + `}`, "README": "saved on Monday"}, ""},
		{"missing", map[string]string{}, "bank.json"},
		{"no such server", map[string]string{"bank.json": `{"tools":` + tools + `}`, "bnak.json": `{"tools":[]}`}, `no server "bnak"`},
		{"inline server", map[string]string{"bank.json": `{"tools":` + tools + `}`, "inline.json": `{"tools":[]}`}, `no server "inline"`},
		{"error response", map[string]string{"bank.json": `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`}, "answered an error"},
		{"one page of several", map[string]string{"bank.json": `{"tools":` + tools + `,"nextCursor":"2"}`}, "nextCursor"},
		{"not an answer", map[string]string{"bank.json": `{"tool":[]}`}, "no tools"},
		{"not JSON", map[string]string{"bank.json": `tools: []`}, "not a tools/list answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := initpolicy.ReadSaved(dir, p)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got["bank"]) != 2 || got["bank"][1].Name != "b" || got["bank"][1].Digest == "" ||
				len(got["inline"]) != 1 || got["inline"][0].Name != "ping" {
				t.Fatalf("read %+v", got)
			}
		})
	}
}

// Whatever a server names its tools and arguments and however it describes them, the policy
// written for it loads with the same names and every tool gated; a definition every preflight
// would repair is written gated too, unpinned when it has no digest, and reported at its line.
func TestHostileDefinitions(t *testing.T) {
	_, p := servers(t, "policy_version: v1\nservers:\n  s: {audience: [e], tools_from: {url: \"http://127.0.0.1:1/mcp\"}}\n")
	defs := []string{
		`{"name":"on","description":"Looks harmless.\nclass: read\n\u202e# gnirts","inputSchema":{"type":"object","properties":{"n":{"type":"string"},"a b":{"type":"string"},"x: y":{},"#c":{},"1e3":{},"yes":{}}}}`,
		`{"name":"tool: read","inputSchema":{"type":"object","properties":{"\u2028":{"type":"string","description":"line\u2029sep"}}}}`,
		`{"name":"no schema"}`,
		`{"name":"dup","inputSchema":{"type":"object"}}`,
		`{"name":"dup","inputSchema":{"type":"object"}}`,
		`{"name":"bad label","description":"[verify] x","inputSchema":{"type":"object","properties":{"z":{}}}}`,
	}
	var raws []json.RawMessage
	for _, d := range defs {
		raws = append(raws, json.RawMessage(d))
	}
	listed := map[string][]upstream.Tool{"s": upstream.ParseTools("s", raws)}
	out, problems, err := initpolicy.Write(p, listed, "servers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := policy.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if names := slices.Sorted(maps.Keys(got.Tools)); !slices.Equal(names, []string{"s/bad label", "s/dup", "s/no schema", "s/on", "s/tool: read"}) {
		t.Fatalf("tools %q\n%s", names, out)
	}
	for k, pt := range got.Tools {
		if pt.Class != policy.Irreversible {
			t.Errorf("%s: class %q", k, pt.Class)
		}
	}
	if f := fields(got.Tools["s/on"]); !slices.Equal(f, []string{"#c", "1e3", "a b", "n", "x: y", "yes"}) {
		t.Errorf("fields %q\n%s", f, out)
	}
	if f := fields(got.Tools["s/tool: read"]); !slices.Equal(f, []string{"\u2028"}) {
		t.Errorf("fields %q\n%s", f, out)
	}
	if pins := slices.Sorted(maps.Keys(got.Pins["s"].Tools)); !slices.Equal(pins, []string{"bad label", "no schema", "on", "tool: read"}) {
		t.Errorf("pinned %q", pins)
	}
	if text := string(out); strings.ContainsAny(text, "\u202e\u2028\u2029") {
		t.Errorf("a character nobody sees is written as it is:\n%s", out)
	}
	var where []string
	for _, pr := range problems {
		if pr.Line == 0 {
			t.Errorf("problem without a place: %v", pr)
		}
		where = append(where, pr.Path)
	}
	slices.Sort(where)
	if want := []string{`tools["s/bad label"]`, `tools["s/dup"]`, `tools["s/no schema"]`}; !slices.Equal(where, want) {
		t.Errorf("problems at %q, want %q: %v", where, want, problems)
	}
}
