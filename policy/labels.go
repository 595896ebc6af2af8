package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Labels are the provider obligations written into a tool description, one label per line:
//
//	[Required] <field>
//	[Verify] <approval id>: <text>
//	[Notice] <text>
//
// Every other line is advisory prose.
type Labels struct {
	Required []string
	Verify   []VerifyLabel
	Notices  []string
	// Advisory is the description without its label lines.
	Advisory string
}

// VerifyLabel is a [Verify] label: an approval slot over the whole call.
type VerifyLabel struct {
	ID   string
	Text string
}

// LabelError reports a label line that does not parse. A tool with one is a definition-repair
// case, never silently unlabelled.
type LabelError struct {
	Line int // 1-based
	Text string
	Msg  string
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("description line %d: %s: %q", e.Line, e.Msg, e.Text)
}

var (
	labelHeadRE = regexp.MustCompile(`^\s*\[\s*([A-Za-z]+)\s*\]`)
	fieldRE     = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_.$-]*$`)
	verifyIDRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

// ParseLabels parses the labels of a tool description. A line whose leading bracketed word is a
// label name in any spelling must be exactly one of the three forms; a mis-cased or malformed
// label is an error rather than prose, since ignoring it would drop an obligation.
func ParseLabels(description string) (Labels, error) {
	var ls Labels
	var advisory []string
	seenVerify := map[string]bool{}
	forms := [...]string{"[Required]", "[Verify]", "[Notice]"} // a label's name, as it must be written
	for i, line := range strings.Split(description, "\n") {
		line = strings.TrimRight(line, "\r")
		m := labelHeadRE.FindStringSubmatch(line)
		if m == nil {
			advisory = append(advisory, line)
			continue
		}
		which := slices.IndexFunc(forms[:], func(f string) bool { return strings.EqualFold(f, "["+m[1]+"]") })
		if which < 0 {
			advisory = append(advisory, line)
			continue
		}
		canonical := forms[which]
		bad := func(msg string) (Labels, error) {
			return Labels{}, &LabelError{Line: i + 1, Text: line, Msg: msg}
		}
		trimmed := strings.TrimLeft(line, " \t")
		if !strings.HasPrefix(trimmed, canonical) {
			return bad("label must be written " + canonical)
		}
		rest := trimmed[len(canonical):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return bad("label must be followed by a space")
		}
		rest = strings.TrimSpace(rest)
		switch canonical {
		case "[Required]":
			if !fieldRE.MatchString(rest) {
				return bad("[Required] takes exactly one argument name")
			}
			ls.Required = append(ls.Required, rest)
		case "[Verify]":
			id, text, ok := strings.Cut(rest, ":")
			id, text = strings.TrimSpace(id), strings.TrimSpace(text)
			if !ok || !verifyIDRE.MatchString(id) || text == "" {
				return bad("[Verify] must read <approval id>: <text>")
			}
			if seenVerify[id] {
				return bad("duplicate [Verify] id " + id)
			}
			seenVerify[id] = true
			ls.Verify = append(ls.Verify, VerifyLabel{ID: id, Text: text})
		case "[Notice]":
			if rest == "" {
				return bad("[Notice] needs a text")
			}
			ls.Notices = append(ls.Notices, rest)
		}
	}
	ls.Advisory = strings.TrimSpace(strings.Join(advisory, "\n"))
	return ls, nil
}
