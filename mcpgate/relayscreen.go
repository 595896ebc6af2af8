package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/verdictgate/verdict/visible"
)

// A relayed question says who asks.
//
// A question relayed from a pass-through tool's server is the server's
// text, not the gateway's, and the user must be able to tell the two
// apart: the gateway's own forms ask for approvals and values that decide
// a gated call, a server's question may come from anyone the policy lists.
// So every relayed message, and every title and description of its
// fields, starts with the server's id in a form the gateway's own
// questions never use (attribution), and a relayed text may not use that
// form, nor the gateway's own wording (reservedWording), anywhere. And a
// question that asks for a secret (secretWords, or a field of format
// password) is not relayed unless the policy allows it for the tool: the
// gateway is no way for an untrusted read-only server to collect the
// user's credentials.

// attributionOpen starts the attribution of a relayed text.
const attributionOpen = "[server "

// attribution is what a relayed message, field title and field
// description start with: "[server bank] ". A server id is letters,
// digits, '_' and '-' (policy.validServerID), so it cannot close the
// bracket itself.
func attribution(server string) string { return attributionOpen + server + "] " }

// reservedWording is the wording a relayed question may not use: the
// gateway's own, and the attribution. Each phrase is looked for in every
// text of the question (its message, and every name and string of its
// schema, options included) as the text would read to the user: compared
// by skeleton, so that case, characters a host does not draw, spacing,
// punctuation, markup and common lookalike letters do not hide it. A
// phrase atLineStart is reserved at the start of a line only ("Note:" is
// the gateway's; "Please note:" is not).
var reservedWording = reserve([]reserved{
	// The opening line's first clause: a copy that changes its end still
	// reads as the gateway's.
	{text: firstClause(formOpening)},
	{text: noticeMark, atLineStart: true},
	{text: draftMark},
	{text: approvalOpening},
	{text: attributionOpen},
})

// reserved is one phrase of reservedWording, with its compacted skeleton,
// which every text is compared against.
type reserved struct {
	text        string
	atLineStart bool
	skel        string
}

// reserve fills in the skeleton of each phrase, once.
func reserve(rs []reserved) []reserved {
	for i := range rs {
		rs[i].skel = compact(skeleton(rs[i].text), false)
	}
	return rs
}

func firstClause(s string) string {
	before, _, _ := strings.Cut(s, ",")
	return before
}

// secretWords are the words that make a question one that asks for a
// secret, in a field's name, title or description or in the question's
// message. Each is matched as whole words, case-insensitively and by
// skeleton; a name is split at '_', '-', '.', other punctuation and
// camelCase ("cardPin", "PINCode"). A phrase of several words matches
// however it is split ("one-time code", "oneTimeCode", "onetime_code"),
// and every entry matches with a plural s. The list is in
// docs/operations.md.
var secretWords = []string{
	"pin", "passwd", "otp", "totp", "2fa", "cvv", "cvc", "token", "secret", "mnemonic",
	"pass word", "pass code", "pass phrase",
	"one time code", "one time password", "one time pin",
	"verification code", "security code",
	"seed phrase", "recovery phrase", "private key", "api key",
}

// relayRefusal is why a server's question is not shown: its reason code,
// and what in the question, for the log.
type relayRefusal struct {
	reason, detail string
}

func (r *relayRefusal) Error() string { return r.reason + ": " + r.detail }

// result is the host's answer to the call whose question was refused.
func (r *relayRefusal) result(server string) *mcp.CallToolResult {
	if r.reason == ReasonRelayRefusedSecret {
		return toolError(r.reason, fmt.Sprintf("The service %q asked for a secret (such as a PIN, a password or a one-time code), "+
			"which this gateway does not pass on: you were not asked, and the action was not completed.", server))
	}
	return toolError(r.reason, fmt.Sprintf("The service %q asked a question worded like this app's own, "+
		"which this gateway does not pass on: you were not asked, and the action was not completed.", server))
}

// screenQuestion returns the question the host is shown for a server's
// form p: the message and each field's title and description attributed
// to the server, with the characters a host does not draw made visible
// (visibleText), a field without a title titled with its name. A question
// that uses reserved wording, or that asks for a secret while
// allowSecrets is false, is a *relayRefusal; a schema that is not an
// object of flat properties is a plain error. Only the form travels: the
// server's _meta is not shown to the host.
func screenQuestion(server string, p *mcp.ElicitParams, allowSecrets bool) (*mcp.ElicitParams, error) {
	schema, props, err := formSchema(p.RequestedSchema)
	if err != nil {
		return nil, err
	}
	if w := reservedIn(p.Message); w != "" {
		return nil, &relayRefusal{ReasonRelayRefusedWording, fmt.Sprintf("the message uses %q", w)}
	}
	if at, w := reservedInSchema("", schema); w != "" {
		return nil, &relayRefusal{ReasonRelayRefusedWording, fmt.Sprintf("the schema at %s uses %q", at, w)}
	}
	names := slices.Sorted(maps.Keys(props))
	if !allowSecrets {
		if w := secretIn(p.Message); w != "" {
			return nil, &relayRefusal{ReasonRelayRefusedSecret, fmt.Sprintf("the message asks for a secret (%q)", w)}
		}
		if part, w := secretField("", schema); w != "" {
			return nil, &relayRefusal{ReasonRelayRefusedSecret, fmt.Sprintf("the form asks for a secret (%q in its %s)", w, part)}
		}
		for _, n := range names {
			if part, w := secretField(n, props[n]); w != "" {
				return nil, &relayRefusal{ReasonRelayRefusedSecret, fmt.Sprintf("field %q asks for a secret (%q in its %s)", n, w, part)}
			}
		}
	}
	if at := hiddenInSchema("", schema); at != "" {
		return nil, &relayRefusal{ReasonRelayRefusedWording, fmt.Sprintf("the schema at %s holds characters a person does not see", at)}
	}
	attr := attribution(server)
	out := &mcp.ElicitParams{Mode: p.Mode, Message: attr + visibleText(p.Message)}
	if schema == nil {
		return out, nil
	}
	if err := attributeTexts(schema, attr, ""); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := attributeTexts(props[n], attr, n); err != nil {
			return nil, fmt.Errorf("field %q: %w", n, err)
		}
	}
	out.RequestedSchema = schema
	return out, nil
}

// formSchema decodes a form's requested schema afresh (the gateway changes
// its copy) and returns it with its properties; none for a form without a
// schema.
func formSchema(v any) (map[string]any, map[string]map[string]any, error) {
	if v == nil {
		return nil, nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("requested schema: %w", err)
	}
	var schema map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		return nil, nil, errors.New("requested schema is not an object")
	}
	props := map[string]map[string]any{}
	pv, ok := schema["properties"]
	if !ok || schema == nil {
		return schema, props, nil
	}
	pm, ok := pv.(map[string]any)
	if !ok {
		return nil, nil, errors.New("requested schema's properties are not an object")
	}
	for n, v := range pm {
		if props[n], ok = v.(map[string]any); !ok {
			return nil, nil, fmt.Errorf("property %q is not an object", n)
		}
	}
	return schema, props, nil
}

// attributeTexts puts attr before the title and the description of a schema
// object: the form's own, or a property's (name set), which gets its name
// as title when it has none, since that is what a host shows for it.
func attributeTexts(obj map[string]any, attr, name string) error {
	for _, k := range []string{"title", "description"} {
		v, ok := obj[k]
		if !ok {
			if k == "title" && name != "" {
				obj[k] = attr + visibleText(name)
			}
			continue
		}
		s, isString := v.(string)
		if !isString {
			return fmt.Errorf("%s is not a string", k)
		}
		if s == "" && k == "title" && name != "" {
			s = name
		}
		obj[k] = attr + visibleText(s)
	}
	return nil
}

// reservedInSchema returns where in v (a decoded schema) a name or a
// string uses reserved wording, and the wording, or "", "".
func reservedInSchema(at string, v any) (string, string) {
	return findInSchema(at, v, true, nil, reservedIn)
}

// hiddenInSchema returns where in the schema v a string other than a title or a description
// holds a character a person does not see (visible.Count), or "". Titles and descriptions are
// shown marked (attributeTexts), and a field's name is shown as its title when it has none; an
// enumerated value or a default is shown, and answered, as the server wrote it, so one whose
// characters the host would not draw (a direction override that turns a reversed copy of the
// gateway's opening line around, a zero-width space that tells two choices apart) is not
// relayed.
func hiddenInSchema(at string, v any) string {
	shownMarked := func(k string, v any) bool {
		_, text := v.(string)
		return text && (k == "title" || k == "description") || k == "required" // or names, shown as titles
	}
	where, _ := findInSchema(at, v, false, shownMarked, func(s string) string {
		if visible.Count(s) > 0 {
			return "hidden"
		}
		return ""
	})
	return where
}

// findInSchema walks the decoded schema v, object members in name order,
// and returns where the first string for which find returns something is
// (at is v's own place), and what find returned; or "", "". With names,
// the members' names are strings too; a member for which skip reports
// true is passed over.
func findInSchema(at string, v any, names bool, skip func(k string, v any) bool, find func(string) string) (string, string) {
	switch t := v.(type) {
	case string:
		if w := find(t); w != "" {
			return at, w
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kat := strings.TrimPrefix(at+"."+k, ".")
			if names {
				if w := find(k); w != "" {
					return kat, w
				}
			}
			if skip != nil && skip(k, t[k]) {
				continue
			}
			if a, w := findInSchema(kat, t[k], names, skip, find); w != "" {
				return a, w
			}
		}
	case []any:
		for i, e := range t {
			if a, w := findInSchema(fmt.Sprintf("%s[%d]", at, i), e, names, skip, find); w != "" {
				return a, w
			}
		}
	}
	return "", ""
}

// reservedIn returns the reserved wording s uses, or "".
func reservedIn(s string) string {
	sk := skeleton(s)
	whole, lines := compact(sk, false), strings.Split(compact(sk, true), "\n")
	for _, r := range reservedWording {
		w := r.skel
		if !r.atLineStart {
			if strings.Contains(whole, w) {
				return r.text
			}
			continue
		}
		for _, l := range lines {
			if strings.HasPrefix(l, w) {
				return r.text
			}
		}
	}
	return ""
}

// secretField returns which part of a field (its name, title or
// description, or its format) asks for a secret, and the word, or "", "".
func secretField(name string, prop map[string]any) (string, string) {
	if w := secretIn(name); w != "" {
		return "name", w
	}
	for _, k := range []string{"title", "description"} {
		if s, ok := prop[k].(string); ok {
			if w := secretIn(s); w != "" {
				return k, w
			}
		}
	}
	if f, ok := prop["format"].(string); ok && compact(skeleton(f), false) == "password" {
		return "format", "format: password"
	}
	return "", ""
}

// secretIn returns the entry of secretWords s uses, or "". s is read as
// words split at camelCase, and as words split only between letters and
// digits and the rest, so that neither "cardPin" nor "Your PiN" hides one;
// and each reading again with runs of single letters read as one word, so
// that "P.I.N." does not either.
func secretIn(s string) string {
	for _, camel := range []bool{true, false} {
		ws := words(s, camel)
		if e := secretInWords(ws); e != "" {
			return e
		}
		if e := secretInWords(joinInitials(ws)); e != "" {
			return e
		}
	}
	return ""
}

// joinInitials joins each run of one-character words into one word.
func joinInitials(ws []string) []string {
	var out []string
	run := ""
	for _, w := range ws {
		if len([]rune(w)) == 1 {
			run += w
			continue
		}
		if run != "" {
			out, run = append(out, run), ""
		}
		out = append(out, w)
	}
	if run != "" {
		out = append(out, run)
	}
	return out
}

func secretInWords(ws []string) string {
	for _, e := range secretWords {
		parts := strings.Fields(e)
		joined := strings.Join(parts, "")
		for i := range ws {
			if len(parts) == 1 {
				if ws[i] == joined || ws[i] == joined+"s" {
					return e
				}
				continue
			}
			// A phrase matches consecutive whole words that spell it,
			// however they are split.
			acc := ""
			for j := i; j < len(ws) && len(acc) <= len(joined); j++ {
				acc += ws[j]
				if acc == joined || acc == joined+"s" {
					return e
				}
			}
		}
	}
	return ""
}

// words splits s into the words it reads as, each as its skeleton of
// letters and digits: at every character that is not a letter, digit or
// mark (spaces, punctuation, symbols: "card_pin", "card-pin", "card.pin")
// and, with camel, at a change to upper case ("cardPin", "PINCode") and
// from a letter to a digit ("cvv2"). A character a host does not draw
// splits nothing, and neither does the markup a host may render within a
// word ('*', '~', '`': "P**I**N" shows as PIN).
func words(s string, camel bool) []string {
	rs := []rune(norm.NFKD.String(s))
	var out []string
	var cur []rune
	flush := func() {
		if w := compact(skeleton(string(cur)), false); w != "" {
			out = append(out, w)
		}
		cur = cur[:0]
	}
	// prev is the last letter or digit of the word so far, 0 at its start.
	var prev rune
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			switch {
			case prev == 0 || !camel:
			case unicode.IsUpper(r) && unicode.IsLower(prev):
				flush()
			case unicode.IsUpper(r) && unicode.IsUpper(prev) && nextIsLower(rs[i+1:]):
				flush()
			case unicode.IsDigit(r) && unicode.IsLetter(prev):
				flush()
			}
			cur = append(cur, r)
			prev = r
		case joins(r):
			cur = append(cur, r)
		default:
			flush()
			prev = 0
		}
	}
	flush()
	return out
}

// joins reports whether r, not a letter or digit, is part of the word it
// stands in: a mark, a character foldText drops as not drawn, or markup.
func joins(r rune) bool {
	return unicode.IsMark(r) || r == '*' || r == '~' || r == '`' || foldText(string(r)) == ""
}

// nextIsLower reports whether the next letter or digit of rs is lower
// case: "PINCode" splits before the C.
func nextIsLower(rs []rune) bool {
	for _, r := range rs {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.IsLower(r)
		}
		if !joins(r) {
			return false
		}
	}
	return false
}

// foldText is s without the characters a host does not draw (the
// default-ignorable code points, visible.DefaultIgnorable), case-folded,
// for matching only: what the host is shown is written by visibleText.
func foldText(s string) string {
	s = strings.Map(func(r rune) rune {
		if visible.DefaultIgnorable(r) {
			return -1
		}
		return r
	}, s)
	return cases.Fold().String(s)
}

// skeleton is s as it reads, for comparing wording: compatibility
// characters decomposed (fullwidth and mathematical letters, ligatures),
// folded (foldText), without combining marks, and with common lookalikes
// of Latin letters, of ':' and of '[' replaced by them.
func skeleton(s string) string {
	s = foldText(norm.NFKD.String(s))
	var b strings.Builder
	for _, r := range s {
		if unicode.In(r, unicode.Mn, unicode.Me) {
			continue
		}
		if l, ok := lookalikes[r]; ok {
			r = l
		}
		b.WriteRune(r)
	}
	return b.String()
}

// compact keeps of a skeleton what wording is told apart by: letters,
// digits, '[' and ':', and line breaks as '\n' when lines is set. Spaces,
// other punctuation and markup ("**Note**:", "> Note:") do not hide a
// phrase.
func compact(s string, lines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '[' || r == ':':
			b.WriteRune(r)
		case lines && isLineBreak(r):
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// lookalikes maps letters that read as Latin ones (after case folding:
// Cyrillic, Greek, small capitals, dotless i) to those, and characters
// that read as ':' or '[' to them. Compatibility forms (fullwidth,
// mathematical, circled) are left to NFKD.
var lookalikes = map[rune]rune{
	// Cyrillic.
	'а': 'a', 'в': 'b', 'е': 'e', 'һ': 'h', 'н': 'h', 'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l', 'м': 'm',
	'о': 'o', 'р': 'p', 'ԛ': 'q', 'ѕ': 's', 'т': 't', 'у': 'y', 'ԝ': 'w', 'х': 'x', 'ԁ': 'd', 'ь': 'b',
	// Greek.
	'α': 'a', 'β': 'b', 'ε': 'e', 'ζ': 'z', 'η': 'h', 'ι': 'i', 'κ': 'k', 'μ': 'm', 'ν': 'n', 'ο': 'o',
	'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y',
	// Latin small capitals and others.
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j',
	'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z', 'ı': 'i', 'ɩ': 'i', 'ȷ': 'j', 'ɡ': 'g',
	// Colons.
	'꞉': ':', '∶': ':', '˸': ':', 'ː': ':', '׃': ':', '։': ':', '⁚': ':', '܃': ':', '᠄': ':',
	// Opening square brackets.
	'⁅': '[', '⟦': '[', '⦋': '[', '⦍': '[', '⦏': '[', '〔': '[', '〖': '[', '〘': '[', '〚': '[', '【': '[',
	'⟬': '[', '❲': '[', '⸢': '[', '⸤': '[',
}

// maxRelaySampling bounds one relayed sampling request, as JSON, and
// maxSamplingMessages the messages in it.
const (
	maxRelaySampling    = 256 << 10
	maxSamplingMessages = 64
)

// screenSampling returns the sampling request the host is sent for a
// server's p, or an error when it is not relayed: a request without
// messages, with more than maxSamplingMessages or larger than
// maxRelaySampling, or with content other than text, an image or audio.
// The system prompt starts with the server's attribution, as a relayed
// question's message does, and every text has the characters a host does
// not draw made visible (visibleText), so that what the user reviews is
// what the model reads. No context is asked for (includeContext): the
// host's other servers are, to the host, the gateway, which stands for
// every server behind it, so "thisServer" would hand one server what the
// others returned. Only the request travels: the server's _meta and
// provider metadata are not passed on.
func screenSampling(server string, p *mcp.CreateMessageParams) (*mcp.CreateMessageParams, error) {
	if p == nil || len(p.Messages) == 0 {
		return nil, errors.New("no messages")
	}
	if len(p.Messages) > maxSamplingMessages {
		return nil, fmt.Errorf("%d messages", len(p.Messages))
	}
	if b, err := json.Marshal(p); err != nil || len(b) > maxRelaySampling {
		return nil, fmt.Errorf("sampling request larger than %d bytes", maxRelaySampling)
	}
	out := &mcp.CreateMessageParams{
		MaxTokens:        p.MaxTokens,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     strings.TrimSuffix(attribution(server)+visibleText(p.SystemPrompt), " "),
		Temperature:      p.Temperature,
	}
	for i, m := range p.Messages {
		if m == nil {
			return nil, fmt.Errorf("message %d is null", i)
		}
		var c mcp.Content
		switch t := m.Content.(type) {
		case *mcp.TextContent:
			c = &mcp.TextContent{Text: visibleText(t.Text)}
		case *mcp.ImageContent:
			c = &mcp.ImageContent{Data: t.Data, MIMEType: t.MIMEType}
		case *mcp.AudioContent:
			c = &mcp.AudioContent{Data: t.Data, MIMEType: t.MIMEType}
		default:
			return nil, fmt.Errorf("message %d holds %T", i, m.Content)
		}
		out.Messages = append(out.Messages, &mcp.SamplingMessage{Role: m.Role, Content: c})
	}
	return out, nil
}
