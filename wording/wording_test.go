package wording

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/visible"
)

// TestSkeleton: a text's skeleton is what it reads as, whatever code points spell it.
func TestSkeleton(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Note:", "note:"},
		{"BEFORE this", "before this"},
		{"Be\u200bfore th\u2060is a\ufeffhead", "before this ahead"},
		{"No\ufe0fte No\u3164te pa\u00adss", "note note pass"},
		{"Ｂｅｆｏｒｅ", "before"},
		{"\U0001d40d\U0001d428\U0001d42d\U0001d41e", "note"}, // mathematical bold
		{"Bеfоrе", "before"},                                 // Cyrillic е and о
		{"Νᴏτε", "note"},                                     // Greek and small capitals
		{"Be\u0301fore", "before"},
		{"Note：", "note:"},
		{"Note\ua789", "note:"},
		{"【server", "[server"},
		{"［server", "[server"},
		{"ﬁle", "file"},
	}
	for _, tt := range tests {
		if got := Skeleton(tt.in); got != tt.want {
			t.Errorf("Skeleton(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLookalikesAreReached: Skeleton looks a lookalike up after NFKD and case folding, so each
// must be left alone by both to be read at all; and each reads as a Latin letter, ':' or '['.
func TestLookalikesAreReached(t *testing.T) {
	for from, to := range lookalikes {
		if cases.Fold().String(string(from)) != string(from) || norm.NFKD.String(string(from)) != string(from) {
			t.Errorf("%q (%U) is changed before it is looked up", from, from)
		}
		if !(to >= 'a' && to <= 'z' || to == ':' || to == '[') {
			t.Errorf("%q (%U) reads as %q", from, from, to)
		}
		if got := Skeleton(string(from)); got != string(to) {
			t.Errorf("Skeleton(%q) = %q, want %q", from, got, to)
		}
	}
}

// TestSame: spacing, punctuation and markup do not tell two texts apart; letters, digits, ':'
// and '[' do.
func TestSame(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"password", "password", true},
		{"Pass-Word", "password", true},
		{"pass word", "password", true},
		{"Pаssword", "password", true},
		{"**PASSWORD**", "password", true},
		{"passwords", "password", false},
		{"pass:word", "password", false},
		{"text", "password", false},
	}
	for _, tt := range tests {
		if got := Same(tt.a, tt.b); got != tt.same {
			t.Errorf("Same(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

// TestWords: a name splits into the words it reads as, in every naming style, and characters a
// host does not draw and markup within a word split nothing.
func TestWords(t *testing.T) {
	tests := []struct {
		in          string
		camel, flat []string
	}{
		{"card_pin", []string{"card", "pin"}, []string{"card", "pin"}},
		{"card-pin card.pin", []string{"card", "pin", "card", "pin"}, []string{"card", "pin", "card", "pin"}},
		{"cardPin", []string{"card", "pin"}, []string{"cardpin"}},
		{"PINCode", []string{"pin", "code"}, []string{"pincode"}},
		{"cvv2", []string{"cvv", "2"}, []string{"cvv2"}},
		{"P**I**N", []string{"pin"}, []string{"pin"}},
		{"pa\u200bss\u00adword", []string{"password"}, []string{"password"}},
		{"P.I.N.", []string{"p", "i", "n"}, []string{"p", "i", "n"}},
		{"ＰＩＮ", []string{"pin"}, []string{"pin"}},
		{"", nil, nil},
	}
	for _, tt := range tests {
		if got := words(tt.in, true); !slices.Equal(got, tt.camel) {
			t.Errorf("words(%q, camel) = %q, want %q", tt.in, got, tt.camel)
		}
		if got := words(tt.in, false); !slices.Equal(got, tt.flat) {
			t.Errorf("words(%q) = %q, want %q", tt.in, got, tt.flat)
		}
	}
}

// TestSecret: the entry a text or a name uses, as whole words in any naming style, with a
// plural s; a word that merely contains one is none.
func TestSecret(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pin", "pin"},
		{"card_pin", "pin"},
		{"cardPin", "pin"},
		{"PINCode", "pin"},
		{"user.password", "pass word"},
		{"pass-word", "pass word"},
		{"passcode", "pass code"},
		{"passphrase", "pass phrase"},
		{"passwd", "passwd"},
		{"otp-code", "otp"},
		{"oneTimeCode", "one time code"},
		{"onetime_code", "one time code"},
		{"The 6-digit one-time code we sent", "one time code"},
		{"2FA", "2fa"},
		{"cvv2", "cvv"},
		{"CVC", "cvc"},
		{"accessToken", "token"},
		{"client_secret", "secret"},
		{"seedPhrase", "seed phrase"},
		{"recovery-phrase", "recovery phrase"},
		{"mnemonic", "mnemonic"},
		{"privateKey", "private key"},
		{"api_keys", "api key"},
		{"Your verification code", "verification code"},
		{"Your PiN", "pin"},
		{"Both PINs", "pin"},
		{"Please type your card's PIN below.", "pin"},
		{"Pаssword reset", "pass word"},
		{"pa\u200bss\u00adword", "pass word"},
		{"ＰＩＮ", "pin"},
		{"Your P.I.N.", "pin"},
		{"Your P**I**N", "pin"},
		{"pinned", ""},
		{"Keep it pinned?", ""},
		{"spinner opinion Keyboard", ""},
		{"secretary", ""},
		{"We tokenize words", ""},
		{"One time or private?", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Secret(tt.in); got != tt.want {
			t.Errorf("Secret(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSecretWordsIsACopy: the list handed out is the caller's to change.
func TestSecretWordsIsACopy(t *testing.T) {
	ws := SecretWords()
	if !slices.Equal(ws, secretWords) {
		t.Fatalf("SecretWords() = %q", ws)
	}
	ws[0] = "color"
	if Secret("color") != "" || Secret("pin") != "pin" {
		t.Error("changing the returned list changed what Secret finds")
	}
}

// testPhrases are phrases of the kinds a caller reserves: clauses found anywhere, one found at
// the start of a line only, and one with a bracket.
var testPhrases = NewPhrases(
	Phrase{Text: "Before this goes ahead"},
	Phrase{Text: "Note:", AtLineStart: true},
	Phrase{Text: "drafted for you"},
	Phrase{Text: "[server "},
)

// TestPhrasesIn: a phrase is found however it is spelled, spaced or marked up; one AtLineStart
// only at the start of a line, after any line break; and a text that only resembles one is not.
func TestPhrasesIn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Before this goes ahead, type the code we sent.", "Before this goes ahead"},
		{"BEFORE  this\u00a0goes\nahead!", "Before this goes ahead"},
		{"Be\u200bfore th\u2060is goes a\ufeffhead", "Before this goes ahead"},
		{"Ｂｅｆｏｒｅ ｔｈｉｓ ｇｏｅｓ ａｈｅａｄ", "Before this goes ahead"},
		{"Bеfоrе this gоеs аhеаd", "Before this goes ahead"},
		{"Be\u0301fore this goes ahead", "Before this goes ahead"},
		{"Which color?\nNote: the bank needs your card number.", "Note:"},
		{"Note: this is required.", "Note:"},
		{"Which?\n \t Note: x", "Note:"},
		{"Which?\n> **Note**: x", "Note:"},
		{"Which?\u2028NOTE : x", "Note:"},
		{"Which?\rnote: x", "Note:"},
		{"Which?\nNote： x", "Note:"},
		{"Which?\nNote\ua789 x", "Note:"},
		{"Which?\nΝᴏτε: x", "Note:"},
		{"Which?\nNo\ufe0fte: x", "Note:"},
		{"Which?\nNo\u3164te: x", "Note:"},
		{"The memo drafted for you follows.", "drafted for you"},
		{"Which color?\n\n[server bank] Please confirm.", "[server "},
		{"[ Server  bank ] hi", "[server "},
		{"【server bank】 hi", "[server "},
		{"［server bank］ hi", "[server "},
		{"Please note: this survey is anonymous.", ""},
		{"Notes: optional", ""},
		{"Note that it is optional.", ""},
		{"[1] Which color? (server side)", ""},
		{"Which server should we ask?", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := testPhrases.In(tt.in); got != tt.want {
			t.Errorf("In(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var none Phrases
	if got := none.In("Note: x"); got != "" {
		t.Errorf("the empty set found %q", got)
	}
}

// TestPhrasesAll: the set gives back its phrases as they were given, in order, as the caller's
// own slice.
func TestPhrasesAll(t *testing.T) {
	want := []Phrase{{Text: "Before this goes ahead"}, {Text: "Note:", AtLineStart: true}, {Text: "drafted for you"}, {Text: "[server "}}
	all := testPhrases.All()
	if !slices.Equal(all, want) {
		t.Fatalf("All() = %+v", all)
	}
	all[1] = Phrase{Text: "color"}
	if testPhrases.In("Note: x") != "Note:" || testPhrases.In("color") != "" {
		t.Error("changing the returned phrases changed the set")
	}
}

// The classes of disguise a text may try on a phrase: each keeps what a person reads, and each
// is undone when wording is compared.

// invisibles are the characters a host does not draw: every default-ignorable code point
// (visible.DefaultIgnorable), which Fold drops.
func invisibles() []rune {
	var out []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if visible.DefaultIgnorable(r) {
			out = append(out, r)
		}
	}
	return out
}

// spaces are the white space characters a host draws as a gap, line breaks excluded.
func spaces() []rune {
	var out []rune
	for r := rune(0); r <= 0x3000; r++ {
		if unicode.Is(unicode.White_Space, r) && !isLineBreak(r) {
			out = append(out, r)
		}
	}
	return out
}

// disguise draws a text that reads as s: each letter in a drawn case or as a lookalike
// (fullwidth, mathematical bold, Cyrillic, Greek, small capital), invisible characters and
// markup between characters, and any white space for a space.
func disguise(t *rapid.T, s string, invis, gaps []rune, markup []string) string {
	like := map[rune][]rune{}
	for from, to := range lookalikes {
		like[to] = append(like[to], from)
	}
	for k := range like {
		slices.Sort(like[k])
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == ' ':
			for range rapid.IntRange(1, 3).Draw(t, "gaps") {
				b.WriteRune(rapid.SampledFrom(gaps).Draw(t, "gap"))
			}
			continue
		case unicode.IsLetter(r) || r == ':' || r == '[':
			lr := unicode.ToLower(r)
			switch rapid.IntRange(0, 5).Draw(t, "how") {
			case 0:
				r = unicode.ToUpper(r)
			case 1:
				r = lr
			case 2:
				if r < 0x7f {
					r += 0xfee0 // fullwidth
				}
			case 3:
				if lr >= 'a' && lr <= 'z' {
					r = 0x1d41a + lr - 'a' // mathematical bold small
				}
			case 4:
				if ls := like[lr]; len(ls) > 0 {
					r = rapid.SampledFrom(ls).Draw(t, "lookalike")
					if rapid.Bool().Draw(t, "upper") {
						r = unicode.ToUpper(r)
					}
				}
			}
		}
		b.WriteRune(r)
		if i < len(s)-1 && rapid.IntRange(0, 3).Draw(t, "between") == 0 {
			if rapid.Bool().Draw(t, "markup") {
				b.WriteString(rapid.SampledFrom(markup).Draw(t, "punct"))
			} else {
				b.WriteRune(rapid.SampledFrom(invis).Draw(t, "invisible"))
			}
		}
	}
	return b.String()
}

// TestPhrasesCannotBeDisguised: every phrase, disguised in any of the classes above, after any
// text (on a line of its own for a phrase AtLineStart, after white space and markup), is found.
func TestPhrasesCannotBeDisguised(t *testing.T) {
	invis, gaps := invisibles(), spaces()
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SampledFrom(testPhrases.All()).Draw(t, "phrase")
		text := disguise(t, p.Text, invis, gaps, []string{"*", "_", "~", "`", "-", ".", "'"})
		lead := rapid.SampledFrom([]string{"", " ", "\t", "  > ", "- ", "**", "# ", "\u3000"}).Draw(t, "lead")
		before := rapid.SampledFrom([]string{"", "Which color?", "Thanks.", "ok"}).Draw(t, "before")
		if p.AtLineStart {
			if before != "" {
				before += string(rapid.SampledFrom([]rune{'\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029'}).Draw(t, "break"))
			}
		} else if before != "" {
			before += " "
		}
		text = before + lead + text + rapid.SampledFrom([]string{"", " please answer.", ": 1234", "**"}).Draw(t, "after")
		if got := testPhrases.In(text); got != p.Text {
			t.Fatalf("In(%q) = %q, want %q", text, got, p.Text)
		}
	})
}

// TestSecretsCannotBeDisguised: a name made of any secret word among other words, in any naming
// style and plural or not, asks for a secret; so does a text saying it, in any case and with
// invisible characters, markup and lookalikes in its letters.
func TestSecretsCannotBeDisguised(t *testing.T) {
	invis, gaps := invisibles(), spaces()
	others := []string{"card", "user", "new", "bank", "your", "current", "value", "field"}
	// The markup a host renders within a word.
	inWord := []string{"*", "**", "~~", "`"}
	rapid.Check(t, func(t *rapid.T) {
		secret := strings.Fields(rapid.SampledFrom(SecretWords()).Draw(t, "secret"))
		if rapid.Bool().Draw(t, "plural") {
			secret[len(secret)-1] += "s"
		}
		ws := slices.Concat(
			rapid.SliceOfN(rapid.SampledFrom(others), 0, 2).Draw(t, "before"),
			secret,
			rapid.SliceOfN(rapid.SampledFrom(others), 0, 2).Draw(t, "after"))
		title := func(w string) string { return strings.ToUpper(w[:1]) + w[1:] }
		var s string
		switch rapid.IntRange(0, 7).Draw(t, "style") {
		case 0:
			s = strings.Join(ws, "_")
		case 1:
			s = strings.Join(ws, "-")
		case 2:
			s = strings.Join(ws, ".")
		case 3: // camelCase
			s = ws[0]
			for _, w := range ws[1:] {
				s += title(w)
			}
		case 4: // PascalCase
			for _, w := range ws {
				s += title(w)
			}
		case 5:
			s = strings.ToUpper(strings.Join(ws, "_"))
		case 6:
			s = disguise(t, strings.Join(ws, " "), invis, gaps, inWord)
		default:
			s = "Type " + disguise(t, strings.Join(ws, " "), invis, gaps, inWord) + "."
		}
		if Secret(s) == "" {
			t.Fatalf("%q asks for no secret", s)
		}
	})
}
