package gates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
)

// The invariants of the preflight engine, over generated tools, policies and requests:
//
//  1. no slot is ever known from an untrusted segment, from an untrusted pre-set value, or from a
//     candidate whose span text does not denote its value;
//  2. a verdict is issued iff the tool is irreversible, unknown_count == 0 and unmet is empty;
//  3. call_arguments hold only known values, and every proposed argument is in them or is an
//     unknown slot;
//  4. arguments_digest is the canonical digest of call_arguments;
//  5. a case built to settle (an irreversible tool, nothing drafted, every argument located
//     exactly in the user's words or pre-set from a trusted source) issues a verdict.
//
// 3 and 4 say something only of an issued verdict, so three cases in four are built to settle,
// 5 holds the generator to reaching them, and the test counts the verdicts they were
// checked on and runs rapid's checks again, round after round, until there are at least
// minIssued of them: however few checks a run asks rapid for (-rapid.checks, -short), the two
// invariants are held to that many verdicts, or the test fails saying the generator no longer
// reaches them.
func TestEngineInvariants(t *testing.T) {
	const (
		minIssued = 200
		maxRounds = 100
	)
	issued, cases := 0, 0
	for round := 0; issued < minIssued && round < maxRounds && !t.Failed(); round++ {
		rapid.Check(t, func(t *rapid.T) {
			cases++
			checkEngineInvariants(t, &issued)
		})
	}
	t.Logf("invariants 1 and 2 checked on %d cases, 3 and 4 on the %d verdicts issued", cases, issued)
	if !t.Failed() && issued < minIssued {
		t.Fatalf("only %d of %d cases issued a verdict, want at least %d: the generator no longer reaches call arguments", issued, cases, minIssued)
	}
}

// checkEngineInvariants generates one case and checks it, counting into issued a verdict on
// which invariants 1 to 4 held.
func checkEngineInvariants(t *rapid.T, issued *int) {
	c := genCase(t)
	eng, err := gates.New(gates.Config{State: gates.NewMemState(), Clock: func() time.Time { return time.Unix(1_796_000_000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	req, err := gates.DecodeRequest(c.body, gates.Limits{})
	if err != nil {
		t.Fatalf("generated request refused: %v\n%s", err, c.body)
	}
	rec, err := eng.Run(context.Background(), gates.Input{Tool: c.tool, Policy: c.policy, Request: req})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	dump := func() string { b, _ := json.MarshalIndent(rec, "", " "); return string(b) + "\n" + string(c.body) }

	// 1. Every known value came from a designated, trusted source, and a drafted one, which
	// only a review settles, is never known without one.
	for _, s := range rec.Slots {
		if s.Kind != api.KindValue || s.Status != "known" || s.Source == nil {
			continue
		}
		if c.drafted[s.SlotID] || *s.Source == api.SourceReviewedDraft {
			t.Fatalf("drafted slot %s known from %s with no review in the request\n%s", s.SlotID, *s.Source, dump())
		}
		switch *s.Source {
		case api.SourceInstruction:
			if !c.groundedByUser(s.SlotID, s.Value) {
				t.Fatalf("slot %s known from the instruction with %v, which no user span denotes\n%s", s.SlotID, s.Value, dump())
			}
		case api.SourcePreSetData:
			p, ok := c.preset[s.SlotID]
			if !ok || !p.user || !sameValue(p.value, s.Value) {
				t.Fatalf("slot %s known from pre-set data it has no trusted entry for\n%s", s.SlotID, dump())
			}
		}
	}

	// 2. A verdict exactly when the tool is irreversible and everything is settled.
	settled := rec.UnknownCount != nil && *rec.UnknownCount == 0 && len(rec.Unmet) == 0
	irreversible := c.class == "" || c.class == "irreversible"
	if issued := rec.Outcome == api.OutcomeVerdictIssued; issued != (settled && irreversible) {
		t.Fatalf("outcome %s with irreversible=%v settled=%v\n%s", rec.Outcome, irreversible, settled, dump())
	}
	if rec.Outcome != api.OutcomeVerdictIssued {
		if c.settle {
			t.Fatalf("a case built to settle issued no verdict\n%s", dump())
		}
		if rec.CallArguments != nil || rec.ArgumentsDigest != nil {
			t.Fatalf("call arguments without a verdict\n%s", dump())
		}
		return
	}

	// 3. Only known values are sent, and nothing proposed is dropped.
	known := map[string]any{}
	for _, s := range rec.Slots {
		if s.Kind == api.KindValue && s.Status == "known" {
			known[s.SlotID] = s.Value
		}
	}
	for _, x := range rec.ExtraFields {
		if c.drafted[x.Field] {
			t.Fatalf("drafted %s sent as an extra field\n%s", x.Field, dump())
		}
		known[x.Field] = x.Value
	}
	for k, v := range rec.CallArguments {
		kv, ok := known[k]
		if !ok || !sameValue(kv, v) {
			t.Fatalf("call argument %s=%v is not a known value\n%s", k, v, dump())
		}
	}
	for field := range c.proposed {
		if _, ok := rec.CallArguments[field]; !ok {
			t.Fatalf("proposed argument %s dropped from an issued call\n%s", field, dump())
		}
	}

	// 4. The digest covers exactly the call.
	d, err := canonical.Digest(rec.CallArguments)
	if err != nil || rec.ArgumentsDigest == nil || *rec.ArgumentsDigest != d {
		t.Fatalf("arguments_digest %v, canonical digest %s (%v)\n%s", rec.ArgumentsDigest, d, err, dump())
	}
	*issued++
}

type genProp struct {
	name, typ string // typ: string, integer, boolean, enum
	required  bool
}

type located struct {
	field, text string
	seg         int
	user        bool
	span        [2]int
	value       any
}

type presetEntry struct {
	value any
	user  bool
}

type engineCase struct {
	tool     gates.Tool
	policy   *policy.Policy
	class    string
	body     []byte
	cands    []located
	preset   map[string]presetEntry
	proposed map[string]bool
	// drafted are the arguments the policy marks drafted: with no answer in the request, none
	// may ever be known.
	drafted map[string]bool
	// settle says the case was built to settle (see genCase): invariant 5.
	settle bool
}

// groundedByUser reports whether some candidate for field points into a user segment at text
// that denotes value.
func (c *engineCase) groundedByUser(field string, value any) bool {
	for _, l := range c.cands {
		if l.field == field && l.user && l.seg >= 0 && denotes(l.text, value) {
			return true
		}
	}
	return false
}

func denotes(text string, v any) bool {
	switch v := v.(type) {
	case string:
		return text == v || strings.EqualFold(text, v)
	case json.Number:
		return strings.NewReplacer(",", "", "_", "", " ", "", "+", "").Replace(text) == v.String()
	}
	return false
}

func sameValue(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return reflect.DeepEqual(ja, jb)
}

var enumMembers = []string{"standard", "express"}

func genCase(t *rapid.T) *engineCase {
	c := &engineCase{preset: map[string]presetEntry{}, proposed: map[string]bool{}, drafted: map[string]bool{}}
	n := rapid.IntRange(1, 5).Draw(t, "props")
	var props []genProp
	for i := range n {
		props = append(props, genProp{
			name:     fmt.Sprintf("f%d", i),
			typ:      rapid.SampledFrom([]string{"string", "integer", "boolean", "enum"}).Draw(t, "type"),
			required: rapid.Bool().Draw(t, "required"),
		})
	}
	schemaProps := map[string]any{}
	var required []string
	for _, p := range props {
		switch p.typ {
		case "enum":
			schemaProps[p.name] = map[string]any{"type": "string", "enum": enumMembers}
		default:
			schemaProps[p.name] = map[string]any{"type": p.typ}
		}
		if p.required {
			required = append(required, p.name)
		}
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": schemaProps, "required": append([]string{}, required...), "additionalProperties": false})
	c.tool = gates.Tool{Name: "act", Description: "Does the thing.", InputSchema: schema}

	// Three cases in four are built to settle: an irreversible tool, nothing drafted, every
	// required argument located exactly in the user's words or pre-set from a trusted source.
	// Invariants 3 and 4 hold only of issued verdicts, so most cases must issue one; the
	// others are drawn from everything.
	settle := rapid.IntRange(0, 3).Draw(t, "settle") > 0
	c.settle = settle
	classes := []string{"", "irreversible", "reversible", "read"}
	if settle {
		classes = classes[:2]
	}
	c.class = rapid.SampledFrom(classes).Draw(t, "class")
	classLine := ""
	if c.class != "" {
		classLine = "\n    class: " + c.class
	}
	var drafted []string
	for _, p := range props {
		if p.typ == "string" && !settle && rapid.Bool().Draw(t, "drafted") {
			drafted = append(drafted, p.name)
			c.drafted[p.name] = true
		}
	}
	draftedLine := ""
	if len(drafted) > 0 {
		draftedLine = "\n    drafted: [" + strings.Join(drafted, ", ") + "]"
	}
	pol, err := policy.Parse([]byte(`policy_version: prop
servers: {srv: {audience: [exec], tools_from: {command: [srv-mcp]}}}
tools:
  srv/act:` + classLine + draftedLine + `
    actions: ["do it"]
`))
	if err != nil {
		t.Fatal(err)
	}
	c.policy = pol

	// Two segments: the user's words and an untrusted forwarded text. Values are written into
	// either, at known code-point offsets.
	segs := []*strings.Builder{{}, {}}
	segs[0].WriteString("do it ")
	segs[1].WriteString("fwd: ")
	write := func(seg int, s string) [2]int {
		start := utf8.RuneCountInString(segs[seg].String())
		segs[seg].WriteString(s)
		end := utf8.RuneCountInString(segs[seg].String())
		segs[seg].WriteString(" · ")
		return [2]int{start, end}
	}
	valueOf := func(p genProp, label string) (any, string) {
		switch p.typ {
		case "integer":
			n := rapid.IntRange(-50, 5000).Draw(t, label)
			return json.Number(fmt.Sprint(n)), fmt.Sprint(n)
		case "boolean":
			b := rapid.Bool().Draw(t, label)
			return b, fmt.Sprint(b)
		case "enum":
			m := rapid.SampledFrom(enumMembers).Draw(t, label)
			return m, rapid.SampledFrom([]string{m, strings.ToUpper(m)}).Draw(t, label+"_text")
		default:
			s := rapid.StringMatching(`[a-z0-9]{1,8}`).Draw(t, label)
			return s, s
		}
	}

	var cands []map[string]any
	for _, p := range props {
		kind := rapid.IntRange(0, 4)
		switch {
		case settle && p.typ == "boolean": // no text grounds a boolean: a trusted stored value
			kind = rapid.Just(4)
		case settle:
			kind = rapid.SampledFrom([]int{1, 4})
		}
		switch kind.Draw(t, "candidate_"+p.name) {
		case 0: // none
		case 1, 2: // located, in the user's words or the untrusted text, maybe pointing at other text
			v, text := valueOf(p, "value_"+p.name)
			seg := 0
			if !settle {
				seg = rapid.IntRange(0, 1).Draw(t, "seg_"+p.name)
			}
			written := text
			if !settle && rapid.IntRange(0, 3).Draw(t, "mismatch_"+p.name) == 0 {
				written = text + "x"
			}
			sp := write(seg, written)
			if !settle && rapid.IntRange(0, 5).Draw(t, "offbyone_"+p.name) == 0 {
				sp[1]++
			}
			c.cands = append(c.cands, located{field: p.name, text: spanOf(segs[seg].String(), sp), seg: seg, user: seg == 0, span: sp, value: v})
			cands = append(cands, map[string]any{"field": p.name, "segment": seg, "span": sp, "value": v})
			c.proposed[p.name] = true
		case 3: // proposed without a location
			v, _ := valueOf(p, "value_"+p.name)
			cands = append(cands, map[string]any{"field": p.name, "value": v})
			c.proposed[p.name] = true
		case 4: // a stored value, trusted or not
			v, _ := valueOf(p, "preset_"+p.name)
			user := settle || rapid.Bool().Draw(t, "preset_user_"+p.name)
			c.preset[p.name] = presetEntry{value: v, user: user}
		}
	}
	preset := map[string]any{}
	for k, p := range c.preset {
		trust := "untrusted"
		if p.user {
			trust = "user"
		}
		preset[k] = map[string]any{"value": p.value, "trust": trust, "origin": "settings"}
	}
	body, _ := json.Marshal(map[string]any{
		"principal":       "u_01",
		"conversation_id": "c_prop",
		"server":          "srv",
		"tool":            "act",
		"instruction": []map[string]any{
			{"text": segs[0].String(), "trust": "user"},
			{"text": segs[1].String(), "trust": "untrusted", "origin": "mail"},
		},
		"intent":       map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 5}}},
		"candidates":   cands,
		"pre_set_data": preset,
	})
	c.body = body
	return c
}

// spanOf returns the code points [sp[0], sp[1]) of s, or "" when out of range.
func spanOf(s string, sp [2]int) string {
	r := []rune(s)
	if sp[0] < 0 || sp[1] > len(r) || sp[0] > sp[1] {
		return ""
	}
	return string(r[sp[0]:sp[1]])
}
