package visible

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// readRanges reads a property file in the format of the Unicode Character Database
// ("0000..0001 ; Property # comment" lines) and returns every code point it lists.
func readRanges(t *testing.T, path string) map[rune]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set := map[rune]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		cps, _, _ := strings.Cut(text, ";")
		lo, hi, ok := strings.Cut(strings.TrimSpace(cps), "..")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 16, 32)
		b, err2 := strconv.ParseUint(hi, 16, 32)
		if err1 != nil || err2 != nil || a > b {
			t.Fatalf("%s:%d: bad range %q", path, line, text)
		}
		for r := rune(a); r <= rune(b); r++ {
			set[r] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestDefaultIgnorableTable holds DefaultIgnorable, derived from the standard library's tables,
// to the Default_Ignorable_Code_Point ranges as the Unicode Character Database publishes them
// (testdata/default_ignorable.txt, whose header says where they come from), at every code point.
func TestDefaultIgnorableTable(t *testing.T) {
	want := readRanges(t, "testdata/default_ignorable.txt")
	if len(want) != 4174 {
		t.Fatalf("the published list holds %d code points, want 4174", len(want))
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got := DefaultIgnorable(r); got != want[r] {
			t.Errorf("DefaultIgnorable(U+%04X) = %v, the published property says %v", r, got, want[r])
		}
	}
}

func TestHidden(t *testing.T) {
	tests := []struct {
		r      rune
		hidden bool
		why    string
	}{
		{'a', false, "a letter"},
		{' ', false, "space"},
		{'\n', false, "newline is kept"},
		{'\t', false, "tab is kept"},
		{'\r', true, "carriage return"},
		{0x00, true, "NUL"},
		{0x7F, true, "DEL"},
		{0x85, true, "C1 control NEL"},
		{0xA0, false, "no-break space is drawn as a space"},
		{0xAD, true, "soft hyphen"},
		{0x034F, true, "combining grapheme joiner"},
		{0x061C, true, "Arabic letter mark"},
		{0x0600, false, "Arabic number sign: a prepended concatenation mark, drawn"},
		{0x115F, true, "Hangul choseong filler"},
		{0x1160, true, "Hangul jungseong filler"},
		{0x17B4, true, "Khmer vowel inherent AQ"},
		{0x17B5, true, "Khmer vowel inherent AA"},
		{0x180B, true, "Mongolian free variation selector one"},
		{0x180E, true, "Mongolian vowel separator"},
		{0x200B, true, "zero width space"},
		{0x200D, true, "zero width joiner"},
		{0x200E, true, "left-to-right mark"},
		{0x202E, true, "right-to-left override"},
		{0x2028, true, "line separator"},
		{0x2029, true, "paragraph separator"},
		{0x2060, true, "word joiner"},
		{0x2066, true, "left-to-right isolate"},
		{0x2065, true, "unassigned, default ignorable"},
		{0x2800, true, "Braille pattern blank"},
		{0x3000, false, "ideographic space is drawn as a space"},
		{0x3164, true, "Hangul filler"},
		{0xFE00, true, "variation selector 1"},
		{0xFE0F, true, "variation selector 16"},
		{0xFEFF, true, "zero width no-break space"},
		{0xFFA0, true, "halfwidth Hangul filler"},
		{0xFFF0, true, "unassigned specials"},
		{0xFFF9, true, "interlinear annotation anchor: format, hides what it encloses"},
		{0xFFFC, false, "object replacement character is drawn"},
		{0xFFFD, false, "a literal replacement character is drawn"},
		{0xFFFE, true, "noncharacter"},
		{0xE000, true, "private use"},
		{0x1BCA0, true, "shorthand format letter overlap"},
		{0x1D173, true, "musical symbol begin beam"},
		{0x13430, true, "Egyptian hieroglyph vertical joiner: format"},
		{0xE0001, true, "language tag"},
		{0xE0041, true, "tag latin capital letter A"},
		{0xE0100, true, "variation selector 17"},
		{0xE01EF, true, "variation selector 256"},
		{0xE0FFF, true, "unassigned, default ignorable"},
		{0xF0000, true, "supplementary private use"},
		{0x10FFFF, true, "noncharacter"},
		{0x1F600, false, "an emoji"},
		{0x0301, false, "a combining accent is drawn on its base"},
		{0x0E01, false, "a Thai letter"},
		{0x4E00, false, "a Han character"},
		{0x0378, true, "unassigned Greek"},
	}
	for _, tt := range tests {
		if got := Hidden(tt.r); got != tt.hidden {
			t.Errorf("Hidden(U+%04X) = %v, want %v (%s)", tt.r, got, tt.hidden, tt.why)
		}
	}
}

// Every default-ignorable code point is hidden, and every code point outside the categories
// Hidden looks at is not.
func TestHiddenCovers(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if DefaultIgnorable(r) && !Hidden(r) {
			t.Errorf("U+%04X is default ignorable but not hidden", r)
		}
		if unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.Sm, unicode.Sc) && !DefaultIgnorable(r) && Hidden(r) {
			t.Errorf("U+%04X, a letter, number, punctuation or symbol, is hidden", r)
		}
	}
}

// The plane table Hidden reads says what the tables say, at every code point of the plane.
func TestHiddenBMPTable(t *testing.T) {
	for r := rune(0xA0); r <= 0xFFFF; r++ {
		if got, want := Hidden(r), hidden(r); got != want {
			t.Errorf("Hidden(U+%04X) = %v, the tables say %v", r, got, want)
		}
	}
}

// BenchmarkHidden is Hidden over every rune of a text, as grounding asks it of a segment.
func BenchmarkHidden(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"latin", strings.Repeat("Grüße, señor — café ", 50)},
		{"korean", strings.Repeat("김철수 님께 15000원을 보내줘 ", 50)},
		{"han", strings.Repeat("给张三转账五百元。", 100)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				for _, r := range bc.text {
					if Hidden(r) {
						b.Fatalf("U+%04X", r)
					}
				}
			}
		})
	}
}

func TestMark(t *testing.T) {
	tests := []struct {
		in, want string
		n        int
	}{
		{"", "", 0},
		{"December rent. Thanks!", "December rent. Thanks!", 0},
		{"line one\nline\ttwo", "line one\nline\ttwo", 0},
		{"pay\u200b100", "pay⟦U+200B⟧100", 1},
		{"rent\ufe00\ufe01", "rent⟦U+FE00⟧⟦U+FE01⟧", 2},
		{"x\U000E0100", "x⟦U+E0100⟧", 1},
		{"\u202eabc", "⟦U+202E⟧abc", 1},
		{"a\xffb", "a⟦byte 0xff⟧b", 1},
		{"a\r\nb", "a⟦U+000D⟧\nb", 1},
		{"é and 日本", "é and 日本", 0},
	}
	for _, tt := range tests {
		got, n := Mark(tt.in)
		if got != tt.want || n != tt.n {
			t.Errorf("Mark(%q) = %q, %d; want %q, %d", tt.in, got, n, tt.want, tt.n)
		}
		if c := Count(tt.in); c != tt.n {
			t.Errorf("Count(%q) = %d, want %d", tt.in, c, tt.n)
		}
	}
}

// Whatever the text, Mark leaves no hidden rune and no invalid byte, counts exactly what it
// replaced, and changes nothing else: removing the marks of the marked runes gives back the
// text without them.
func TestMarkLine(t *testing.T) {
	got, n := mark("Alice\n\nThe memo drafted for you\tfollows\u200b", true)
	if want := "Alice⟦U+000A⟧⟦U+000A⟧The memo drafted for you⟦U+0009⟧follows⟦U+200B⟧"; got != want || n != 4 {
		t.Errorf("mark(line) = %q, %d; want %q, 4", got, n, want)
	}
	if got, n := mark("plain", true); got != "plain" || n != 0 {
		t.Errorf("mark(plain, line) = %q, %d", got, n)
	}
	if got, want := Line("a\nb\u200b"), "a⟦U+000A⟧b⟦U+200B⟧"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got, want := Text("a\nb\u200b"), "a\nb⟦U+200B⟧"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestMarkProperty(t *testing.T) {
	interesting := rapid.SampledFrom([]rune{0x200B, 0x200D, 0xFE0F, 0xE0100, 0x202E, 0x2066, 0x3164,
		0x115F, 0x034F, 0x2800, 0xE000, 0x0378, '\r', 0, 0xAD, 0x1D173, 'a', ' ', '\n', 'é', '日', 0x1F600})
	rapid.Check(t, func(t *rapid.T) {
		runes := rapid.SliceOf(rapid.OneOf(interesting, rapid.Rune())).Draw(t, "runes")
		s := string(runes)
		if rapid.Bool().Draw(t, "invalid") {
			s += "\xff"
		}
		shown, n := Mark(s)
		checkMarked(t, s, shown, n)
	})
}

// markRE matches one mark Mark writes.
var markRE = regexp.MustCompile(`⟦(U\+[0-9A-F]{4,6}|byte 0x[0-9a-f]{2})⟧`)

// checkMarked holds shown, n = Mark(s) to what Mark promises, computed rune by rune.
func checkMarked(t interface{ Fatalf(string, ...any) }, s, shown string, n int) {
	if !utf8.ValidString(shown) {
		t.Fatalf("Mark(%q) is not UTF-8", s)
	}
	for _, r := range shown {
		if Hidden(r) {
			t.Fatalf("Mark(%q) = %q still holds U+%04X", s, shown, r)
		}
	}
	want := 0
	var kept strings.Builder
	for i, r := range s {
		if _, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 || Hidden(r) {
			want++
			continue
		}
		kept.WriteRune(r)
	}
	if n != want || Count(s) != want {
		t.Fatalf("Mark(%q) counted %d, Count %d, want %d", s, n, Count(s), want)
	}
	if n == 0 && shown != s {
		t.Fatalf("Mark(%q) changed a text with nothing to mark: %q", s, shown)
	}
	if !strings.Contains(s, "⟦") {
		if got := markRE.ReplaceAllString(shown, ""); got != kept.String() {
			t.Fatalf("Mark(%q) = %q: without its marks %q, want the text without what it marks %q", s, shown, got, kept.String())
		}
		if m := len(markRE.FindAllString(shown, -1)); m != n {
			t.Fatalf("Mark(%q) = %q holds %d marks, counted %d", s, shown, m, n)
		}
	}
}

func FuzzMark(f *testing.F) {
	for _, s := range []string{"", "plain", "rent\ufe00\ufe01", "a\xffb", "\u202eabc", "👩\u200d💻", "x\U000E0100\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shown, n := Mark(s)
		checkMarked(t, s, shown, n)
		if line, _ := mark(s, true); Text(s) != shown || Line(s) != line {
			t.Fatalf("Text(%q) = %q, Line %q; want Mark's %q and mark(line)'s %q", s, Text(s), Line(s), shown, line)
		}
		c, first := Concealed(s)
		if c > n || c == 0 && first != 0 {
			t.Fatalf("Concealed(%q) = %d, U+%04X with %d marked", s, c, first, n)
		}
	})
}

func TestConcealed(t *testing.T) {
	tests := []struct {
		in    string
		n     int
		first rune
	}{
		{"December rent. Thanks!", 0, 0},
		{"Thanks!\n\tBye", 0, 0},
		{"family 👨\u200d👩\u200d👧 and coder 👩\u200d💻", 0, 0},
		{"rent\ufe00\ufe01", 2, 0xFE00},
		{"heart ❤\ufe0f", 1, 0xFE0F},
		{"a\u200db", 1, ZWJ},
		{"👩\u200d", 1, ZWJ},
		{"\u200d💻", 1, ZWJ},
		{"x\u200b", 1, 0x200B},
		{"bad \xff", 1, utf8.RuneError},
		{"tag\U000E0041\U000E007F", 2, 0xE0041},
	}
	for _, tt := range tests {
		n, first := Concealed(tt.in)
		if n != tt.n || first != tt.first {
			t.Errorf("Concealed(%q) = %d, U+%04X; want %d, U+%04X", tt.in, n, first, tt.n, tt.first)
		}
	}
}
