package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The raw check of a tools/call.
//
// The MCP library decodes a call's _meta into a map, where the last of two
// members with one name wins, and the gateway reads its own entries from
// that map. A host (or whatever writes its messages) that sends
// {"trust": "untrusted", ..., "trust": "user"} would then have the gate read
// one value while every other reader of the same bytes — a log, an
// auditor, verdictd itself, which refuses duplicates — sees another. So the
// params of every tools/call are checked on the bytes the host sent, before
// anything decodes them, wherever the transport hands the gateway a message
// (see screenedTransport and screenHTTP): a params object that names a
// member twice in one object, at any depth, is never decoded as such.

// maxParamsDepth bounds the nesting of a tools/call's params. The check
// recurses once per level, so the bound is also what a depth bomb costs.
const maxParamsDepth = 64

// protocolMetaPrefix starts the names of the MCP protocol's own _meta
// members.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// metaRefused is the _meta member under which the raw check hands its
// finding (a reason code) to the tool handler, which refuses the call with
// it. A host that sends this member itself has its call refused.
const metaRefused = "io.verdict/refused"

// Errors of the raw check.
var (
	ErrDuplicateMember = errors.New("a member name appears twice in one object")
	ErrTooDeep         = errors.New("nesting too deep")
)

// ParamsError says where the raw check found a problem.
type ParamsError struct {
	Path string // the member path, as in "_meta/io.verdict/instruction/0/trust"
	Err  error  // ErrDuplicateMember, ErrTooDeep, or a syntax error
}

func (e *ParamsError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *ParamsError) Unwrap() error { return e.Err }

// foldName maps a member name to the form two names share when they are
// equal under Unicode simple case folding (as strings.EqualFold compares
// them). Decoders that match member names that way (encoding/json among
// them) read "trust", "Trust" and "truſt" as one name, so the check counts
// them as one. Each rune becomes the least rune of its folding orbit; for
// ASCII that is the upper-case letter (the orbits of k and s hold the
// Kelvin sign and the long s, both above 'K' and 'S'), so an ASCII name
// is folded without a table walk, and one without a lower-case letter is
// its own form.
func foldName(s string) string {
	lower := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldRunes(s)
		}
		lower = lower || ('a' <= c && c <= 'z')
	}
	if !lower {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// foldRunes is foldName for any name.
func foldRunes(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// rawErr is a finding of checkValue with the path to it, leaf first: the
// path is put together only for a finding, not for every value read.
type rawErr struct {
	segs []pathSeg
	err  error
}

func (e *rawErr) Error() string { return e.err.Error() }

// pathSeg is one step of a path: a member name, or an array index.
type pathSeg struct {
	name  string
	index int // -1 for a member
}

// in adds the step into which the finding lies, on its way up.
func (e *rawErr) in(seg pathSeg) *rawErr {
	e.segs = append(e.segs, seg)
	return e
}

// paramsError is the finding as a ParamsError: "a/b" below members, "/0"
// for an index (as "<path>/<index>", even at the top).
func (e *rawErr) paramsError() *ParamsError {
	path := ""
	for i := len(e.segs) - 1; i >= 0; i-- {
		if seg := e.segs[i]; seg.index >= 0 {
			path = path + "/" + strconv.Itoa(seg.index)
		} else {
			path = join(path, seg.name)
		}
	}
	return &ParamsError{Path: path, Err: e.err}
}

// smallObject is how many member names an object holds before its names
// are kept in a map rather than a list searched in order.
const smallObject = 8

// checkValue reads one JSON value from dec and reports the first member
// name that repeats in one object (after unescaping, under case folding)
// or nesting past maxParamsDepth. Names that are not valid UTF-8 or hold
// lone surrogates are read as the decoder reads them (U+FFFD), so two such
// names count as one.
func checkValue(dec *json.Decoder, depth int) *rawErr {
	tok, err := dec.Token()
	if err != nil {
		return &rawErr{err: err}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxParamsDepth {
		return &rawErr{err: ErrTooDeep}
	}
	switch d {
	case '[':
		for i := 0; dec.More(); i++ {
			if e := checkValue(dec, depth+1); e != nil {
				return e.in(pathSeg{index: i})
			}
		}
	case '{':
		var (
			few  [smallObject]string
			n    int
			many map[string]bool
		)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return &rawErr{err: err}
			}
			name, _ := tok.(string)
			f := foldName(name)
			seen := many[f]
			for _, g := range few[:n] {
				seen = seen || g == f
			}
			if seen {
				return (&rawErr{err: ErrDuplicateMember}).in(pathSeg{name: name, index: -1})
			}
			switch {
			case n < smallObject:
				few[n] = f
				n++
			case many == nil:
				many = map[string]bool{f: true}
			default:
				many[f] = true
			}
			if e := checkValue(dec, depth+1); e != nil {
				return e.in(pathSeg{name: name, index: -1})
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return &rawErr{err: err}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "/" + name
}

// CheckJSON reports the first repeated member name or excess nesting in
// the one JSON value data holds, and any syntax error.
func CheckJSON(data []byte) error { return checkAt(data, 0) }

// checkAt is CheckJSON for a value nested depth levels down. Nearly every
// value is sound, and quickSound tells so cheaply; any other value is read
// again by checkValue, whose finding (where, and what) is the answer.
func checkAt(data []byte, depth int) error {
	if quickSound(data, depth) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if e := checkValue(dec, depth); e != nil {
		return e.paramsError()
	}
	if _, err := dec.Token(); err != io.EOF {
		return &ParamsError{Err: errors.New("trailing data after the value")}
	}
	return nil
}

// screenParams checks the params of a tools/call as the host sent them.
// Params without a repeated member name (anywhere, arguments included)
// and within maxParamsDepth come back unchanged, the same bytes. Any other
// params come back as a call the handler refuses: the tool's name (when
// the params name it exactly once), and _meta holding the protocol's own
// members of the host's _meta (io.modelcontextprotocol/*) that are sound
// on their own — a 2026-07-28 request needs them to reach the handler at
// all — plus metaRefused with the reason code: arguments_invalid when the only
// problem is inside arguments, meta_invalid otherwise. Arguments, answers
// and requestState are dropped: nothing of such a call is used.
//
// Params that are not a JSON object at all are left to the MCP library,
// which refuses them, unless the check could not read what the library
// might: then the call becomes a refused call without a name.
func screenParams(params json.RawMessage) (json.RawMessage, *ParamsError) {
	if len(bytes.TrimSpace(params)) == 0 {
		return params, nil
	}
	err := CheckJSON(params)
	if err == nil {
		return params, nil
	}
	var pe *ParamsError
	if !errors.As(err, &pe) {
		pe = &ParamsError{Err: err}
	}
	ms, merr := topLevel(params)
	if merr != nil {
		return refusedParams(nil, nil, ReasonMetaInvalid), pe
	}
	reason := ReasonArgumentsInvalid
	names := map[string]int{}
	for _, m := range ms {
		names[foldName(m.name)]++
	}
	for _, m := range ms {
		if names[foldName(m.name)] > 1 || (m.name != "arguments" && checkAt(m.value, 1) != nil) {
			reason = ReasonMetaInvalid
		}
	}
	var name json.RawMessage
	for _, m := range ms {
		if m.name == "name" && names[foldName(m.name)] == 1 {
			name = m.value
		}
	}
	// The protocol's own members of _meta that are sound: in every
	// "_meta" object, those whose name appears once across all of them
	// and whose value holds no problem of its own.
	var meta fieldList
	metaNames := map[string]int{}
	for _, m := range ms {
		if m.name != "_meta" {
			continue
		}
		inner, err := topLevel(m.value)
		if err != nil {
			continue
		}
		for _, im := range inner {
			metaNames[foldName(im.name)]++
		}
		meta = append(meta, inner...)
	}
	var kept fieldList
	for _, m := range meta {
		if metaNames[foldName(m.name)] == 1 && strings.HasPrefix(m.name, protocolMetaPrefix) && checkAt(m.value, 2) == nil {
			kept = append(kept, m)
		}
	}
	return refusedParams(name, kept, reason), pe
}

// refusedParams encodes the params of a call the handler refuses with
// reason.
func refusedParams(name json.RawMessage, meta fieldList, reason string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	if name == nil || !isJSONString(name) {
		name = json.RawMessage(`""`)
	}
	b.Write(name)
	b.WriteString(`,"_meta":{`)
	for _, m := range meta {
		n, _ := json.Marshal(m.name)
		b.Write(n)
		b.WriteByte(':')
		b.Write(m.value)
		b.WriteByte(',')
	}
	n, _ := json.Marshal(metaRefused)
	r, _ := json.Marshal(reason)
	b.Write(n)
	b.WriteByte(':')
	b.Write(r)
	b.WriteString(`}}`)
	return b.Bytes()
}

func isJSONString(v json.RawMessage) bool {
	var s string
	return json.Unmarshal(v, &s) == nil && utf8.ValidString(s)
}

// quickReader is a reusable decoder for quickSound.
type quickReader struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

// quickReaders keeps quickSound's decoders between calls.
var quickReaders = sync.Pool{New: func() any { return new(quickReader) }}

// quickOptions read what encoding/json reads: invalid UTF-8 is no error, and
// repeated names are quickSound's to find.
var quickOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// quickSound reports whether checkAt(data, depth) finds nothing, without
// encoding/json's tokenizer (which allocates for every token). It answers
// true only for one JSON value and nothing after it, nested within
// maxParamsDepth from depth, whose member names are written without escapes
// in valid UTF-8 and differ, in each object, under foldName. For anything
// else it answers false, and checkValue reads the value.
func quickSound(data []byte, depth int) bool {
	q := quickReaders.Get().(*quickReader)
	q.buf = *bytes.NewBuffer(data)
	q.dec.Reset(&q.buf, quickOptions)
	ok := quickValue(&q.dec, data, depth)
	if ok {
		_, err := q.dec.ReadToken()
		ok = err == io.EOF
	}
	q.buf = bytes.Buffer{} // keep no reference to data
	q.dec.Reset(&q.buf)
	quickReaders.Put(q)
	return ok
}

// quickValue reads one value for quickSound.
func quickValue(dec *jsontext.Decoder, data []byte, depth int) bool {
	switch dec.PeekKind() {
	case jsontext.KindInvalid:
		return false
	case jsontext.KindBeginArray:
		if depth >= maxParamsDepth {
			return false
		}
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		for dec.PeekKind() != jsontext.KindEndArray {
			if !quickValue(dec, data, depth+1) {
				return false
			}
		}
	case jsontext.KindBeginObject:
		if depth >= maxParamsDepth {
			return false
		}
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		var (
			few  [smallObject][]byte
			n    int
			many map[string]bool
		)
		for dec.PeekKind() != jsontext.KindEndObject {
			v, err := dec.ReadValue()
			if err != nil || v.Kind() != '"' {
				return false
			}
			// The name as written, in data (not in the decoder's buffer).
			end := int(dec.InputOffset())
			name := data[end-len(v)+1 : end-1]
			if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
				return false
			}
			for _, g := range few[:n] {
				if sameName(g, name) {
					return false
				}
			}
			switch {
			case n < smallObject:
				few[n] = name
				n++
			default:
				if many == nil {
					many = make(map[string]bool, 2*smallObject)
				}
				f := foldName(string(name))
				if many[f] {
					return false
				}
				many[f] = true
			}
			if !quickValue(dec, data, depth+1) {
				return false
			}
		}
	default:
		_, err := dec.ReadValue()
		return err == nil
	}
	_, err := dec.ReadToken() // the closing delimiter
	return err == nil
}

// sameName reports whether foldName(string(a)) == foldName(string(b)),
// for names of valid UTF-8; two ASCII names are compared in place.
func sameName(a, b []byte) bool {
	if !isASCII(a) || !isASCII(b) {
		return foldName(string(a)) == foldName(string(b))
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
