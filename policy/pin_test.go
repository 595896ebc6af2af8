package policy

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

const pinDigest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestPins(t *testing.T) {
	p, err := Parse([]byte(`
policy_version: "1"
servers:
  bank: {audience: [executor-bank], tools_from: {command: [bank]}}
  files: {audience: [executor-bank], tools_from: {command: [files]}}
  mail: {audience: [executor-bank], tools_from: {command: [mail]}}
pins:
  bank:
    all: true
    tools: {transfer: "` + pinDigest + `"}
  files:
    tools: {write: "` + pinDigest + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	other := "sha256:" + strings.Repeat("1", 64)
	for _, tc := range []struct {
		server, tool, got string
		want              error
	}{
		{"bank", "transfer", pinDigest, nil},
		{"bank", "transfer", other, ErrPinMismatch},
		{"bank", "new_tool", other, ErrUnpinned}, // the server is pinned whole
		{"files", "write", other, ErrPinMismatch},
		{"files", "read", other, nil}, // only write is pinned
		{"mail", "send", other, nil},  // mail is not pinned
	} {
		err := p.CheckPin(tc.server, tc.tool, tc.got)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s/%s %s: %v, want %v", tc.server, tc.tool, tc.got[:10], err, tc.want)
		}
	}
}

func TestPinsRefused(t *testing.T) {
	head := "policy_version: \"1\"\nservers:\n  bank: {audience: [e], tools_from: {command: [bank]}}\n"
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown server": {"pins: {nope: {all: true}}", `pins.nope: unknown server "nope"`},
		"bad digest":     {"pins: {bank: {tools: {transfer: sha256:abc}}}", "pins.bank.tools.transfer: a pin is a tool definition digest"},
		"upper hex":      {"pins: {bank: {tools: {transfer: \"sha256:" + strings.Repeat("A", 64) + "\"}}}", "a pin is a tool definition digest"},
		"empty":          {"pins: {bank: {}}", "pins.bank: pins nothing"},
		"unknown key":    {"pins: {bank: {al: true}}", `pins.bank.al: unknown key`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(head + tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParsePins: ParsePins refuses what Parse refuses, with the same problems, and reads the
// pins Parse reads.
func TestParsePins(t *testing.T) {
	docs := []string{
		"policy_version: \"1\"\nservers:\n  bank: {audience: [e], tools_from: {command: [bank]}}\npins: {bank: {all: true, tools: {transfer: \"" + pinDigest + "\"}}}\n",
		"policy_version: \"1\"\nservers:\n  bank: {audience: [e], tools_from: {command: [bank]}}\ntools:\n  bank/transfer: {conditions: [{id: c, expr: \"args.amount >>> 3\"}]}\n",
		"policy_version: \"1\"\npins: {nope: {all: true}}\n",
		"policy_version: [\n",
	}
	for _, f := range policyFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	for _, doc := range docs {
		p, err := Parse([]byte(doc))
		pins, perr := ParsePins([]byte(doc))
		switch {
		case (err == nil) != (perr == nil) || err != nil && err.Error() != perr.Error():
			t.Errorf("%q: Parse: %v\nParsePins: %v", doc, err, perr)
		case err == nil && (pins.Version != p.Version || !reflect.DeepEqual(pins.Pins, p.Pins) || len(pins.Servers) != len(p.Servers) ||
			!reflect.DeepEqual(classes(pins), classes(p))):
			t.Errorf("%q: ParsePins read %+v, Parse %q %v", doc, pins, p.Version, p.Pins)
		}
	}
}

// classes is every tool's class in p, by key.
func classes(p *Policy) map[string]Class {
	out := map[string]Class{}
	for k, t := range p.Tools {
		out[k] = t.EffectiveClass()
	}
	return out
}
