// Package canonical owns the project's one canonical JSON form: RFC 8785
// (JSON Canonicalization Scheme) and the "sha256:<hex>" digests computed
// over it, which verdicts bind to tool arguments and tool definitions.
//
// It is stricter than RFC 8785 in one respect that matters for signing: a
// number is accepted only if its canonical form denotes exactly the decimal
// value that was written. RFC 8785 would silently turn 9007199254740993
// into 9007199254740992; here that is an [Error] with [CodeNumberNotExact],
// so a digest never covers a value other than the one the sender meant.
//
// Every refusal is an [*Error] whose Code says why.
package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting limit of the package-level functions: the
// number of arrays and objects that may enclose a value, the outermost
// counting as one.
const DefaultMaxDepth = 1000

// Options adjusts canonicalization limits. The zero value applies the
// defaults.
type Options struct {
	// MaxDepth bounds nesting of arrays and objects; zero means
	// DefaultMaxDepth.
	MaxDepth int

	// allowInexact turns off the exactness check so that tests can compare
	// output byte for byte with RFC 8785 implementations that round.
	allowInexact bool
}

// Transform returns the RFC 8785 canonical form of the JSON text data.
func Transform(data []byte) ([]byte, error) { return Options{}.Transform(data) }

// Validate reports whether data has a canonical form, with the checks of
// [Transform], without producing it.
func Validate(data []byte) error { return Options{}.Validate(data) }

// DigestJSON returns "sha256:" and the lowercase hex SHA-256 of the canonical
// form of the JSON text data.
func DigestJSON(data []byte) (string, error) { return Options{}.DigestJSON(data) }

// Transform returns the RFC 8785 canonical form of the JSON text data.
func (o Options) Transform(data []byte) ([]byte, error) {
	p := o.parser(data)
	var moved [8]movedObject
	var order [32]span
	p.moved, p.order = moved[:0], order[:0]
	var members [32]member
	var keys [512]byte
	p.members, p.keys = members[:0], keys[:0]
	p.out = make([]byte, 0, len(data))
	if err := p.run(); err != nil {
		return nil, err
	}
	return p.canonical(), nil
}

// Validate reports whether data has a canonical form, with the checks of
// [Options.Transform], without producing it.
func (o Options) Validate(data []byte) error {
	p := o.parser(data)
	var members [32]member
	var keys [512]byte
	p.members, p.keys = members[:0], keys[:0]
	p.validateOnly = true
	var scratch [64]byte
	p.out = scratch[:0]
	if err := p.run(); err != nil {
		return err
	}
	return nil
}

// DigestJSON returns "sha256:" and the lowercase hex SHA-256 of the canonical
// form of the JSON text data.
func (o Options) DigestJSON(data []byte) (string, error) {
	canon, err := o.Transform(data)
	if err != nil {
		return "", err
	}
	return digestOf(canon), nil
}

func (o Options) maxDepth() int {
	if o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}

func (o Options) parser(data []byte) parser {
	return parser{
		in:           data,
		maxDepth:     o.maxDepth(),
		allowInexact: o.allowInexact,
	}
}

func digestOf(canon []byte) string {
	sum := sha256.Sum256(canon)
	var buf [len("sha256:") + 2*sha256.Size]byte
	copy(buf[:], "sha256:")
	hex.Encode(buf[len("sha256:"):], sum[:])
	return string(buf[:])
}

// parser checks a JSON text and writes its canonical form in one pass.
//
// Values are written to out in document order as they are parsed. Member
// order is the only thing that can differ from the final form, and most
// objects (anything encoding/json or a canonicalizer produced) are already
// in order, so out usually is the answer. An object found out of order is
// recorded in moved with its members' spans in sorted order, and canonical
// makes one final copy that emits those members in that order. Every byte is
// therefore copied at most twice, whatever the nesting, which keeps an
// adversarial document from costing size × depth.
type parser struct {
	in           []byte
	pos          int
	out          []byte
	depth        int
	maxDepth     int
	allowInexact bool
	// validateOnly discards output: out holds at most the current scalar,
	// and objects are checked but never reordered.
	validateOnly bool

	// sawReplacement records that a \ufffd escape was decoded; encoding/json
	// writes that escape for invalid UTF-8 in Go strings.
	sawReplacement bool

	members []member // members of the objects being parsed, innermost last
	keys    []byte   // decoded names of those members
	moved   []movedObject
	order   []span // member spans of moved objects, in canonical order
}

// member is one object member under construction.
type member struct {
	keyStart, keyEnd int // decoded name, in parser.keys
	span                 // `"name":value` in parser.out
	inOff            int // offset of the name in the input, for errors
}

type span struct{ start, end int }

// movedObject is an object whose members must be reordered on output.
type movedObject struct {
	span         // the whole object, braces included, in parser.out
	first, n int // its members, in parser.order
}

func (p *parser) run() *Error {
	p.skipSpace()
	if p.pos >= len(p.in) {
		return newError(CodeInvalidJSON, p.pos, "no JSON value")
	}
	if err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return newError(CodeInvalidJSON, p.pos, "unexpected data after the JSON value")
	}
	return nil
}

// canonical returns the canonical form after a successful run.
func (p *parser) canonical() []byte {
	if len(p.moved) == 0 {
		return p.out
	}
	return p.reorder(make([]byte, 0, len(p.out)), 0)
}

// reorder appends out[from:] to dst, in canonical order. dst must not share
// memory with out.
func (p *parser) reorder(dst []byte, from int) []byte {
	// Objects were recorded as they closed, inner before outer; emission
	// looks them up by position.
	slices.SortFunc(p.moved, func(a, b movedObject) int { return a.start - b.start })
	return p.emit(dst, from, len(p.out))
}

// emit appends out[start:end] to dst, writing every moved object inside it
// with its members in canonical order.
func (p *parser) emit(dst []byte, start, end int) []byte {
	i, _ := slices.BinarySearchFunc(p.moved, start, func(m movedObject, off int) int { return m.start - off })
	for i < len(p.moved) && p.moved[i].start < end {
		m := p.moved[i]
		dst = append(dst, p.out[start:m.start]...)
		dst = append(dst, '{')
		for k, s := range p.order[m.first : m.first+m.n] {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = p.emit(dst, s.start, s.end)
		}
		dst = append(dst, '}')
		start = m.end
		// Skip the objects nested in this one; the recursion wrote them.
		i, _ = slices.BinarySearchFunc(p.moved, m.end, func(m movedObject, off int) int { return m.start - off })
	}
	return append(dst, p.out[start:end]...)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t' || p.in[p.pos] == '\n' || p.in[p.pos] == '\r') {
		p.pos++
	}
}

// value parses one value starting at a non-space byte.
func (p *parser) value() *Error {
	if p.pos >= len(p.in) {
		return newError(CodeInvalidJSON, p.pos, "unexpected end of input, expected a value")
	}
	if p.validateOnly {
		p.out = p.out[:0]
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return p.string(false)
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		if c == '-' || isDigit(c) {
			return p.number()
		}
		// Only a byte that starts no valid, whole rune decodes as RuneError of size 1; ASCII decodes as itself.
		if r, size := utf8.DecodeRune(p.in[p.pos:]); r == utf8.RuneError && size <= 1 {
			return newError(CodeInvalidUTF8, p.pos, "invalid UTF-8 outside a string")
		}
		return newError(CodeInvalidJSON, p.pos, "unexpected character, expected a value")
	}
}

func (p *parser) literal(lit string) *Error {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return newError(CodeInvalidJSON, p.pos, "invalid literal")
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *parser) number() *Error {
	start := p.pos
	n, end, err := scanNumber(p.in, p.pos)
	if err != nil {
		return err
	}
	p.pos = end
	p.out, err = appendNumber(p.out, p.in[start:end], n, start, p.allowInexact)
	return err
}

func (p *parser) enter() *Error {
	p.depth++
	if p.depth > p.maxDepth {
		return newError(CodeTooDeep, p.pos, "arrays and objects nest too deeply")
	}
	return nil
}

// leave consumes c, the closing bracket of the array or object being parsed.
func (p *parser) leave(c byte) {
	p.pos++
	p.out = append(p.out, c)
	p.depth--
}

func (p *parser) array() *Error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.leave(']')
		return nil
	}
	for {
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return newError(CodeInvalidJSON, p.pos, "unexpected end of input in an array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.leave(']')
			return nil
		default:
			return newError(CodeInvalidJSON, p.pos, "expected ',' or ']' in an array")
		}
	}
}

func (p *parser) object() *Error {
	if err := p.enter(); err != nil {
		return err
	}
	objStart := len(p.out)
	p.pos++ // '{'
	p.out = append(p.out, '{')
	base, keyBase := len(p.members), len(p.keys)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.leave('}')
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return newError(CodeInvalidJSON, p.pos, "expected a string naming an object member")
		}
		m := member{inOff: p.pos, keyStart: len(p.keys)}
		m.start = len(p.out)
		if err := p.string(true); err != nil {
			return err
		}
		m.keyEnd = len(p.keys)
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return newError(CodeInvalidJSON, p.pos, "expected ':' after an object member name")
		}
		p.pos++
		p.out = append(p.out, ':')
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		m.end = len(p.out)
		p.members = append(p.members, m)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return newError(CodeInvalidJSON, p.pos, "unexpected end of input in an object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		}
		if p.in[p.pos] == '}' {
			p.leave('}')
			break
		}
		return newError(CodeInvalidJSON, p.pos, "expected ',' or '}' in an object")
	}

	if err := p.order1(objStart, p.members[base:]); err != nil {
		return err
	}
	p.members = p.members[:base]
	p.keys = p.keys[:keyBase]
	return nil
}

// order1 checks the members of the object just closed for duplicates and,
// if they are out of canonical order, records how to reorder them.
func (p *parser) order1(objStart int, ms []member) *Error {
	key := func(m member) []byte { return p.keys[m.keyStart:m.keyEnd] }
	sorted := true
	for i := 1; i < len(ms); i++ {
		switch c := compareUTF16(key(ms[i-1]), key(ms[i])); {
		case c == 0:
			return newError(CodeDuplicateKey, ms[i].inOff, "object has a duplicate member name")
		case c > 0:
			sorted = false
		}
	}
	if sorted {
		return nil
	}
	// Validating, out of order is fine, but duplicates still need finding.
	// For the small objects that arguments are made of, comparing every
	// pair for equality is cheaper than sorting.
	if p.validateOnly && len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if string(key(ms[i])) == string(key(ms[j])) {
					return newError(CodeDuplicateKey, ms[i].inOff, "object has a duplicate member name")
				}
			}
		}
		return nil
	}
	slices.SortFunc(ms, func(a, b member) int { return compareUTF16(key(a), key(b)) })
	for i := 1; i < len(ms); i++ {
		if compareUTF16(key(ms[i-1]), key(ms[i])) == 0 {
			return newError(CodeDuplicateKey, max(ms[i-1].inOff, ms[i].inOff), "object has a duplicate member name")
		}
	}
	if p.validateOnly {
		return nil
	}
	mo := movedObject{span: span{objStart, len(p.out)}, first: len(p.order), n: len(ms)}
	for _, m := range ms {
		p.order = append(p.order, m.span)
	}
	p.moved = append(p.moved, mo)
	return nil
}

// string parses a string starting at its opening quote, writing its
// canonical form to out and, for a member name, its decoded text to keys.
func (p *parser) string(isKey bool) *Error {
	open := p.pos
	p.pos++
	p.out = append(p.out, '"')
	for {
		// Copy the longest run that needs no attention at once.
		run := p.pos
		for p.pos < len(p.in) {
			c := p.in[p.pos]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			p.pos++
		}
		if p.pos > run {
			p.out = append(p.out, p.in[run:p.pos]...)
			if isKey {
				p.keys = append(p.keys, p.in[run:p.pos]...)
			}
		}
		if p.pos >= len(p.in) {
			return newError(CodeInvalidJSON, open, "unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.out = append(p.out, '"')
			return nil
		case c < 0x20:
			return newError(CodeInvalidJSON, p.pos, "unescaped control character in a string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return newError(CodeInvalidUTF8, p.pos, "string is not valid UTF-8")
			}
			p.out = append(p.out, p.in[p.pos:p.pos+size]...)
			if isKey {
				p.keys = append(p.keys, p.in[p.pos:p.pos+size]...)
			}
			p.pos += size
		default: // '\\'
			r, err := p.escape()
			if err != nil {
				return err
			}
			p.out = appendStringRune(p.out, r)
			if isKey {
				p.keys = utf8.AppendRune(p.keys, r)
			}
		}
	}
}

// escape decodes the escape sequence at pos, joining a surrogate pair.
func (p *parser) escape() (rune, *Error) {
	at := p.pos
	if p.pos+1 >= len(p.in) {
		return 0, newError(CodeInvalidJSON, at, "unterminated escape sequence")
	}
	c := p.in[p.pos+1]
	p.pos += 2
	// A backslash and one of these stands for the character at the same index of the second string.
	if i := strings.IndexByte(`"\/bfnrt`, c); i >= 0 {
		return rune("\"\\/\b\f\n\r\t"[i]), nil
	}
	if c != 'u' {
		return 0, newError(CodeInvalidJSON, at, "invalid escape sequence")
	}
	r, ok := hex4(p.in, p.pos)
	if !ok {
		return 0, newError(CodeInvalidJSON, at, "invalid \\u escape")
	}
	p.pos += 4
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, newError(CodeLoneSurrogate, at, "\\u escape is a low surrogate without a high surrogate")
	case r >= 0xD800 && r <= 0xDBFF:
		if p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
			return 0, newError(CodeLoneSurrogate, at, "\\u escape is a high surrogate without a low surrogate")
		}
		lo, ok := hex4(p.in, p.pos+2)
		if !ok {
			return 0, newError(CodeInvalidJSON, p.pos, "invalid \\u escape")
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, newError(CodeLoneSurrogate, at, "\\u escape is a high surrogate without a low surrogate")
		}
		p.pos += 6
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
	case r == utf8.RuneError:
		p.sawReplacement = true
	}
	return r, nil
}

// hex4 reads the four hex digits, of either case, at b[pos:].
func hex4(b []byte, pos int) (rune, bool) {
	var v [2]byte
	if len(b)-pos < 4 {
		return 0, false
	}
	if _, err := hex.Decode(v[:], b[pos:pos+4]); err != nil {
		return 0, false
	}
	return rune(v[0])<<8 | rune(v[1]), true
}

// appendStringRune appends r as it appears inside a canonical string:
// RFC 8785 §3.2.2.2 escapes only '"', '\\' and the C0 controls, using the
// short forms where JSON has them and lowercase \u00xx otherwise.
func appendStringRune(dst []byte, r rune) []byte {
	// These are written as a backslash and the character at the same index of the second string.
	if i := strings.IndexRune("\"\\\b\f\n\r\t", r); i >= 0 {
		return append(dst, '\\', `"\bfnrt`[i])
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 §3.2.3 requires. UTF-8 byte order is code point order, which
// agrees with UTF-16 order except between U+E000–U+FFFF and the
// supplementary planes (encoded as surrogates D800–DFFF, so they sort
// first), so only the first differing code point needs decoding.
func compareUTF16[T ~string | ~[]byte](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(string(a[i:min(i+utf8.UTFMax, len(a))]))
	rb, _ := utf8.DecodeRuneInString(string(b[i:min(i+utf8.UTFMax, len(b))]))
	return utf16Unit(ra) - utf16Unit(rb)
}

// utf16Unit is the first UTF-16 code unit of r, scaled so that runes sharing
// a high surrogate still order by code point.
func utf16Unit(r rune) int {
	if r < 0x10000 {
		return int(r) << 10
	}
	return (0xD800+int(r-0x10000)>>10)<<10 | int(r-0x10000)&0x3FF
}
