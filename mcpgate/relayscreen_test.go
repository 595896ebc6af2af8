package mcpgate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/askform"
	"github.com/verdictgate/verdict/wording"
)

// form is a relayed form of one string property name with the given
// property members.
func relayForm(message, name string, prop map[string]any) *mcp.ElicitParams {
	if prop == nil {
		prop = map[string]any{}
	}
	if _, ok := prop["type"]; !ok {
		prop["type"] = "string"
	}
	return &mcp.ElicitParams{Message: message, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{name: prop}, "required": []string{name}}}
}

func refusalOf(err error) string {
	if r, ok := errors.AsType[*relayRefusal](err); ok {
		return r.reason
	}
	return ""
}

// TestScreenQuestionAttributes: the host is shown the server's question
// with the server's id before its message and before each field's title
// and description (a field without a title gets its name), the characters
// a host does not draw made visible; the answer's shape (names, types,
// options, required) is the server's, and its _meta is not shown.
func TestScreenQuestionAttributes(t *testing.T) {
	p := &mcp.ElicitParams{
		Meta:    mcp.Meta{"x": "y"},
		Message: "Which color, for the survey?\u200b",
		RequestedSchema: json.RawMessage(`{"type":"object","title":"Survey","properties":{
			"color":{"type":"string","title":"Color","description":"Your favourite","enum":["red","blue"]},
			"count":{"type":"integer","minimum":1}},"required":["color"]}`),
	}
	q, err := screenQuestion("ask", p, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[server ask] Which color, for the survey?⟦U+200B⟧"; q.Message != want {
		t.Errorf("message %q, want %q", q.Message, want)
	}
	got, _ := json.Marshal(q.RequestedSchema)
	const want = `{"properties":{"color":{"description":"[server ask] Your favourite","enum":["red","blue"],"title":"[server ask] Color","type":"string"},` +
		`"count":{"minimum":1,"title":"[server ask] count","type":"integer"}},"required":["color"],"title":"[server ask] Survey","type":"object"}`
	if string(got) != want {
		t.Errorf("schema\n%s\nwant\n%s", got, want)
	}
	if q.Meta != nil {
		t.Errorf("the server's _meta reached the host: %v", q.Meta)
	}
	// The server's own value is not changed under it.
	if b, _ := json.Marshal(p.RequestedSchema); strings.Contains(string(b), "[server") {
		t.Errorf("the server's form was changed: %s", b)
	}
}

// TestScreenQuestionRefusesReservedWording: a relayed question may not use
// the gateway's own wording or the attribution anywhere a host shows text,
// however it is disguised; a text that only resembles it in passing is
// relayed.
func TestScreenQuestionRefusesReservedWording(t *testing.T) {
	tests := []struct {
		name    string
		form    *mcp.ElicitParams
		refused bool
	}{
		{"the opening line", relayForm(askform.Opening, "color", nil), true},
		{"the opening line, another ending", relayForm("Before this goes ahead, type the code we sent.", "color", nil), true},
		{"the opening line, shouted and spaced", relayForm("BEFORE  this\u00a0goes\nahead!", "color", nil), true},
		{"the opening line, with zero-width characters", relayForm("Be\u200bfore th\u2060is goes a\ufeffhead", "color", nil), true},
		{"the opening line, fullwidth", relayForm("Ｂｅｆｏｒｅ ｔｈｉｓ ｇｏｅｓ ａｈｅａｄ", "color", nil), true},
		{"the opening line, Cyrillic lookalikes", relayForm("Bеfоrе this gоеs аhеаd", "color", nil), true},
		{"the opening line, combining marks", relayForm("Be\u0301fore this goes ahead", "color", nil), true},
		{"a notice line", relayForm("Which color?\nNote: the bank needs your card number.", "color", nil), true},
		{"a notice line, first", relayForm("Note: this is required.", "color", nil), true},
		{"a notice line, indented", relayForm("Which?\n \t Note: x", "color", nil), true},
		{"a notice line, in markup", relayForm("Which?\n> **Note**: x", "color", nil), true},
		{"a notice line, after a line separator", relayForm("Which?\u2028NOTE : x", "color", nil), true},
		{"a notice line, after a carriage return", relayForm("Which?\rnote: x", "color", nil), true},
		{"a notice line, fullwidth colon", relayForm("Which?\nNote： x", "color", nil), true},
		{"a notice line, modifier letter colon", relayForm("Which?\nNote\ua789 x", "color", nil), true},
		{"a notice line, Greek and small capitals", relayForm("Which?\nΝᴏτε: x", "color", nil), true},
		{"a notice line, variation selector", relayForm("Which?\nNo\ufe0fte: x", "color", nil), true},
		{"a notice line, Hangul filler", relayForm("Which?\nNo\u3164te: x", "color", nil), true},
		{"a notice line in a title", relayForm("Which?", "color", map[string]any{"title": "Note: required"}), true},
		{"a notice line in a description", relayForm("Which?", "color", map[string]any{"description": "Pick one.\nNote: x"}), true},
		{"the attribution", relayForm("Which color?\n\n[server bank] Please confirm.", "color", nil), true},
		{"the attribution, spaced", relayForm("[ Server  bank ] hi", "color", nil), true},
		{"the attribution, lookalike bracket", relayForm("【server bank】 hi", "color", nil), true},
		{"the attribution, fullwidth bracket", relayForm("［server bank］ hi", "color", nil), true},
		{"the attribution in a title", relayForm("Which?", "color", map[string]any{"title": "[server bank] Color"}), true},
		{"the attribution in a name", relayForm("Which?", "[server bank] color", nil), true},
		{"the attribution in an option", relayForm("Which?", "color", map[string]any{
			"oneOf": []any{map[string]any{"const": "r", "title": "[server bank] red"}}}), true},
		{"the attribution in an enum", relayForm("Which?", "color", map[string]any{"enum": []any{"red", "[server bank] blue"}}), true},
		{"the approval opening", relayForm("This request must be approved by you.", "color", nil), true},
		{"the draft announcement", relayForm("The memo drafted for you follows.", "color", nil), true},
		{"a reversed opening line turned by an override, in an enum", relayForm("Which?", "color", map[string]any{
			"enum": []any{"red", "\u202e.gniwollof eht rewsna esaelp ,daeha seog siht erofeB"}}), true},
		{"two choices told apart by a zero-width space", relayForm("Which?", "color", map[string]any{"enum": []any{"red", "red\u200b"}}), true},
		{"a hidden character in a default", relayForm("Which?", "color", map[string]any{"default": "red\U000E0041"}), true},
		{"a hidden character in an option's value", relayForm("Which?", "color", map[string]any{
			"oneOf": []any{map[string]any{"const": "r\ufe0f", "title": "red"}}}), true},
		{"a hidden character in a title is shown marked", relayForm("Which?", "color", map[string]any{"title": "Co\u200blor"}), false},
		{"note in passing", relayForm("Please note: this survey is anonymous.", "color", nil), false},
		{"notes", relayForm("Notes: optional", "color", nil), false},
		{"note that", relayForm("Note that it is optional.", "color", nil), false},
		{"a bracket", relayForm("[1] Which color? (server side)", "color", nil), false},
		{"the word server", relayForm("Which server should we ask?", "server", nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := screenQuestion("evil", tt.form, true)
			switch got := refusalOf(err); {
			case tt.refused && got != api.ReasonRelayRefusedWording:
				t.Errorf("relayed (%v), want %s", err, api.ReasonRelayRefusedWording)
			case !tt.refused && err != nil:
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestScreenQuestionRefusesSecrets: a question that asks for a secret, in
// its message or a field's name, title, description or format, is refused
// unless the policy allows it; the words are whole words.
func TestScreenQuestionRefusesSecrets(t *testing.T) {
	tests := []struct {
		name    string
		form    *mcp.ElicitParams
		refused bool
	}{
		{"pin", relayForm("Which?", "pin", nil), true},
		{"card_pin", relayForm("Which?", "card_pin", nil), true},
		{"cardPin", relayForm("Which?", "cardPin", nil), true},
		{"PINCode", relayForm("Which?", "PINCode", nil), true},
		{"user.password", relayForm("Which?", "user.password", nil), true},
		{"pass-word", relayForm("Which?", "pass-word", nil), true},
		{"passcode", relayForm("Which?", "passcode", nil), true},
		{"passphrase", relayForm("Which?", "passphrase", nil), true},
		{"passwd", relayForm("Which?", "passwd", nil), true},
		{"otp-code", relayForm("Which?", "otp-code", nil), true},
		{"oneTimeCode", relayForm("Which?", "oneTimeCode", nil), true},
		{"onetime_code", relayForm("Which?", "onetime_code", nil), true},
		{"2FA", relayForm("Which?", "2FA", nil), true},
		{"cvv2", relayForm("Which?", "cvv2", nil), true},
		{"CVC", relayForm("Which?", "CVC", nil), true},
		{"accessToken", relayForm("Which?", "accessToken", nil), true},
		{"client_secret", relayForm("Which?", "client_secret", nil), true},
		{"seedPhrase", relayForm("Which?", "seedPhrase", nil), true},
		{"recovery-phrase", relayForm("Which?", "recovery-phrase", nil), true},
		{"mnemonic", relayForm("Which?", "mnemonic", nil), true},
		{"privateKey", relayForm("Which?", "privateKey", nil), true},
		{"api_keys", relayForm("Which?", "api_keys", nil), true},
		{"title", relayForm("Which?", "code", map[string]any{"title": "Your PIN"}), true},
		{"title, mixed case", relayForm("Which?", "code", map[string]any{"title": "Your PiN"}), true},
		{"title, plural", relayForm("Which?", "code", map[string]any{"title": "Both PINs"}), true},
		{"description", relayForm("Which?", "code", map[string]any{"description": "The 6-digit one-time code we sent"}), true},
		{"description, verification code", relayForm("Which?", "code", map[string]any{"description": "Your verification code"}), true},
		{"format password", relayForm("Which?", "code", map[string]any{"format": "password"}), true},
		{"the message", relayForm("Please type your card's PIN below.", "code", nil), true},
		{"the form's title", &mcp.ElicitParams{Message: "Which?", RequestedSchema: map[string]any{"type": "object", "title": "Password reset"}}, true},
		{"Cyrillic lookalike", relayForm("Which?", "code", map[string]any{"title": "Pаssword"}), true},
		{"zero-width inside", relayForm("Which?", "pa\u200bss\u00adword", nil), true},
		{"fullwidth", relayForm("Which?", "ＰＩＮ", nil), true},
		{"initials", relayForm("Which?", "code", map[string]any{"title": "Your P.I.N."}), true},
		{"markup within the word", relayForm("Which?", "code", map[string]any{"title": "Your P**I**N"}), true},
		{"pinned", relayForm("Which?", "pinned", map[string]any{"title": "Keep it pinned?"}), false},
		{"spinner, opinion, keyboard", relayForm("Your opinion?", "spinner", map[string]any{"title": "Keyboard"}), false},
		{"secretary, tokenize", relayForm("Which?", "secretary", map[string]any{"description": "We tokenize words"}), false},
		{"one time, private", relayForm("One time or private?", "color", nil), false},
		{"no fields", &mcp.ElicitParams{Message: "Go on?"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := screenQuestion("evil", tt.form, false)
			switch got := refusalOf(err); {
			case tt.refused && got != api.ReasonRelayRefusedSecret:
				t.Errorf("relayed (%v), want %s", err, api.ReasonRelayRefusedSecret)
			case !tt.refused && err != nil:
				t.Errorf("refused: %v", err)
			}
			// The policy's allow_secrets lets it through, attributed.
			q, err := screenQuestion("evil", tt.form, true)
			if err != nil || !strings.HasPrefix(q.Message, "[server evil] ") {
				t.Errorf("allowed: %v %+v", err, q)
			}
		})
	}
}

// TestScreenQuestionRefusesOtherSchemas: a schema that is not an object of
// object properties with string titles is not relayed, as a plain error.
func TestScreenQuestionRefusesOtherSchemas(t *testing.T) {
	for _, s := range []any{
		json.RawMessage(`[1]`), json.RawMessage(`"x"`),
		map[string]any{"properties": []any{}},
		map[string]any{"properties": map[string]any{"a": "string"}},
		map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string", "title": 3}}},
		map[string]any{"description": false},
	} {
		_, err := screenQuestion("evil", &mcp.ElicitParams{Message: "Which?", RequestedSchema: s}, true)
		if err == nil || refusalOf(err) != "" {
			t.Errorf("%v: %v", s, err)
		}
	}
}

// TestGatewayWordingIsReserved: the reserved set covers what the gateway's
// own questions say: a form's message, line by line, and an approval
// message. A server's question that copies any of it is refused.
func TestGatewayWordingIsReserved(t *testing.T) {
	rec := &api.Record{
		Notices: []string{"Transfers run at once."},
		Questions: []api.Question{
			{QuestionID: "q1", Kind: "value", SlotID: "to_account", Message: "Which account?", Schema: json.RawMessage(`{"type":"string"}`)},
			{QuestionID: "q2", Kind: api.QuestionReviewDraft, SlotID: "memo", Message: "Send this memo?", Value: "hello"},
		},
	}
	f, err := askform.Build(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	msg := f.Params().Message
	for l := range strings.Lines(msg) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Before") || strings.HasPrefix(l, "Note:") || strings.Contains(l, "drafted for you") {
			if reservedWording.In(l) == "" {
				t.Errorf("the gateway's line %q is not reserved", l)
			}
		}
	}
	if reservedWording.In(approvalMessage(&api.Record{}, &api.RecordApproval{}, "Open the page.")) == "" {
		t.Error("the approval message is not reserved")
	}
	for _, r := range reservedWording.All() {
		if reservedWording.In(r.Text) != r.Text {
			t.Errorf("%q does not find itself", r.Text)
		}
	}
	// The gateway's own questions never start with the attribution.
	if strings.HasPrefix(msg, attributionOpen) {
		t.Errorf("the gateway's form starts with the attribution: %q", msg)
	}
}

// placeIn puts text where a host shows it: the message, a field's name,
// title or description, or an option's title, and returns the form.
func placeIn(t *rapid.T, text string) *mcp.ElicitParams {
	switch rapid.IntRange(0, 4).Draw(t, "where") {
	case 0:
		return relayForm(text, "color", nil)
	case 1:
		return relayForm("Which?", text, nil)
	case 2:
		return relayForm("Which?", "color", map[string]any{"title": text})
	case 3:
		return relayForm("Which?", "color", map[string]any{"description": text})
	default:
		return relayForm("Which?", "color", map[string]any{"oneOf": []any{map[string]any{"const": "r", "title": text}}})
	}
}

// TestReservedWordingIsRefusedWhereverShown: every reserved phrase, after
// any text (on a line of its own for a phrase reserved at the start of a
// line, after white space and markup) and wherever a host shows it, is
// refused. That a disguised phrase still reads as itself is package
// wording's (TestPhrasesCannotBeDisguised there).
func TestReservedWordingIsRefusedWhereverShown(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rapid.SampledFrom(reservedWording.All()).Draw(t, "phrase")
		lead := rapid.SampledFrom([]string{"", " ", "\t", "  > ", "- ", "**", "# ", "\u3000"}).Draw(t, "lead")
		before := rapid.SampledFrom([]string{"", "Which color?", "Thanks.", "ok"}).Draw(t, "before")
		if r.AtLineStart {
			if before != "" {
				before += string(rapid.SampledFrom([]rune{'\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029'}).Draw(t, "break"))
			}
		} else if before != "" {
			before += " "
		}
		text := before + lead + r.Text + rapid.SampledFrom([]string{"", " please answer.", ": 1234", "**"}).Draw(t, "after")
		f := placeIn(t, text)
		if _, err := screenQuestion("evil", f, true); refusalOf(err) != api.ReasonRelayRefusedWording {
			t.Fatalf("%q relayed: %v", text, err)
		}
	})
}

// TestSecretNamesAreRefused: a field named with any secret word, among
// other words, in any naming style and plural or not, is refused; a title
// or description saying it is refused too. That a disguised word still
// reads as itself is package wording's (TestSecretsCannotBeDisguised
// there).
func TestSecretNamesAreRefused(t *testing.T) {
	others := []string{"card", "user", "new", "bank", "your", "current", "value", "field"}
	rapid.Check(t, func(t *rapid.T) {
		secret := strings.Fields(rapid.SampledFrom(wording.SecretWords()).Draw(t, "secret"))
		if rapid.Bool().Draw(t, "plural") {
			secret[len(secret)-1] += "s"
		}
		ws := slices.Concat(
			rapid.SliceOfN(rapid.SampledFrom(others), 0, 2).Draw(t, "before"),
			secret,
			rapid.SliceOfN(rapid.SampledFrom(others), 0, 2).Draw(t, "after"))
		title := func(w string) string { return strings.ToUpper(w[:1]) + w[1:] }
		var name string
		switch rapid.IntRange(0, 5).Draw(t, "style") {
		case 0:
			name = strings.Join(ws, "_")
		case 1:
			name = strings.Join(ws, "-")
		case 2:
			name = strings.Join(ws, ".")
		case 3: // camelCase
			name = ws[0]
			for _, w := range ws[1:] {
				name += title(w)
			}
		case 4: // PascalCase
			for _, w := range ws {
				name += title(w)
			}
		default:
			name = strings.ToUpper(strings.Join(ws, "_"))
		}
		var f *mcp.ElicitParams
		switch rapid.IntRange(0, 2).Draw(t, "where") {
		case 0:
			f = relayForm("Which?", name, nil)
		case 1:
			f = relayForm("Which?", "value", map[string]any{"title": strings.Join(ws, " ")})
		default:
			f = relayForm("Which?", "value", map[string]any{"description": "Type " + strings.Join(ws, " ") + "."})
		}
		if _, err := screenQuestion("evil", f, false); refusalOf(err) != api.ReasonRelayRefusedSecret {
			t.Fatalf("%q relayed: %v", name, err)
		}
	})
}

// TestRelayedQuestionsAreAttributed: a form of harmless words is relayed
// with the attribution before its message and every field's title and
// description, and nothing after the attribution reads as reserved
// wording: the attribution is the only one in what the host is shown.
func TestRelayedQuestionsAreAttributed(t *testing.T) {
	vocab := []string{"which", "color", "size", "notes", "server", "please", "answer", "the", "survey", "count", "(", ")", "?", ".", "\n", "[", "]", ":"}
	rapid.Check(t, func(t *rapid.T) {
		text := func(label string) string {
			return strings.Join(rapid.SliceOfN(rapid.SampledFrom(vocab), 0, 8).Draw(t, label), " ")
		}
		server := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`).Draw(t, "server")
		props := map[string]any{}
		for i := range rapid.IntRange(0, 3).Draw(t, "fields") {
			p := map[string]any{"type": "string"}
			if rapid.Bool().Draw(t, "titled") {
				p["title"] = text("title")
			}
			if rapid.Bool().Draw(t, "described") {
				p["description"] = text("description")
			}
			props[string(rune('a'+i))+"field"] = p
		}
		f := &mcp.ElicitParams{Message: text("message"), RequestedSchema: map[string]any{"type": "object", "properties": props}}
		q, err := screenQuestion(server, f, false)
		if refusalOf(err) == api.ReasonRelayRefusedWording {
			// The vocabulary can spell "[server" or "note:" at a line's start.
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		attr := "[server " + server + "] "
		shown := []string{q.Message}
		for _, p := range q.RequestedSchema.(map[string]any)["properties"].(map[string]any) {
			pm := p.(map[string]any)
			shown = append(shown, pm["title"].(string))
			if d, ok := pm["description"].(string); ok {
				shown = append(shown, d)
			}
		}
		for _, s := range shown {
			rest, ok := strings.CutPrefix(s, attr)
			if !ok {
				t.Fatalf("%q is not attributed to %s", s, server)
			}
			if w := reservedWording.In(rest); w != "" {
				t.Fatalf("%q reads as reserved wording %q after the attribution", rest, w)
			}
		}
	})
}
