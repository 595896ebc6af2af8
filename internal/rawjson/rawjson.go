// Package rawjson checks JSON bytes before any decoder reads them, for the
// ways two readers of the same bytes can read different values.
//
// A decoder keeps the last of two members with one name (encoding/json
// does, into a map or a struct, and matches a struct's fields under case
// folding), so {"trust": "untrusted", ..., "trust": "user"} reads as "user"
// to it, and so does "Trust" for a field named trust, while a reader that
// keeps the first, or refuses duplicates, reads "untrusted" or nothing. A
// gate that decides on a value must see what every other reader of the
// same bytes sees — a log, an auditor, a daemon that refuses duplicates —
// so the bytes are checked as they were sent, before anything decodes
// them: Check finds a member name that repeats in one object (after
// unescaping, under Unicode simple case folding), nesting past a bound,
// and anything that is not one JSON value, and says where.
//
// Nearly every value is sound, so Check first asks Sound, which reads the
// bytes without encoding/json's tokenizer (which allocates for every token)
// and says only that a value is certainly sound; any other value is read
// again, the slow way, for the finding and its path.
package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Findings of Check, as the Err of a *PathError.
var (
	ErrDuplicateMember = errors.New("a member name appears twice in one object")
	ErrTooDeep         = errors.New("nesting too deep")
)

// PathError says where Check found a problem.
type PathError struct {
	// Path is the member names and array indexes down to the problem, each
	// after a "/" but the first member name: "a/b/0/c", or "/0/c" when the
	// value is an array. Names are not escaped (a name may hold a "/"), so
	// a path is for people to read, not a JSON pointer.
	Path string
	Err  error // ErrDuplicateMember, ErrTooDeep, or a syntax error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// Check reports the first member name that repeats in one object, or the
// first array or object nested deeper than maxDepth levels (the outermost
// value being the first level), in the one JSON value data holds, and any
// syntax error, trailing data after the value included. Every error is a
// *PathError. Names are compared after unescaping and under FoldName;
// names that are not valid UTF-8 or hold lone surrogates are read as
// encoding/json reads them (U+FFFD), so two such names count as one.
//
// A value nested within a larger one is checked against the larger one's
// bound by giving the levels that remain: for a member of an object
// checked with maxDepth n, n-1. Check recurses once per level, so the
// bound is also what a depth bomb costs.
func Check(data []byte, maxDepth int) error {
	if Sound(data, maxDepth) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if e := checkValue(dec, maxDepth); e != nil {
		return e.pathError()
	}
	if _, err := dec.Token(); err != io.EOF {
		return &PathError{Err: errors.New("trailing data after the value")}
	}
	return nil
}

// FoldName maps a member name to the form two names share when they are
// equal under Unicode simple case folding (as strings.EqualFold compares
// them). Decoders that match member names that way (encoding/json among
// them) read "trust", "Trust" and "truſt" as one name, so Check counts
// them as one. Each rune becomes the least rune of its folding orbit; for
// ASCII that is the upper-case letter (the orbits of k and s hold the
// Kelvin sign and the long s, both above 'K' and 'S'), so an ASCII name
// is folded without a table walk, and one without a lower-case letter is
// its own form.
func FoldName(s string) string {
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

// foldRunes is FoldName for any name.
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

// pathError is the finding as a PathError: "a/b" below members, "/0"
// for an index (as "<path>/<index>", even at the top).
func (e *rawErr) pathError() *PathError {
	path := ""
	for i := len(e.segs) - 1; i >= 0; i-- {
		if seg := e.segs[i]; seg.index >= 0 {
			path = path + "/" + strconv.Itoa(seg.index)
		} else {
			path = join(path, seg.name)
		}
	}
	return &PathError{Path: path, Err: e.err}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "/" + name
}

// smallObject is how many member names an object holds before its names
// are kept in a map rather than a list searched in order.
const smallObject = 8

// checkValue reads one JSON value from dec and reports the first member
// name that repeats in one object or an array or object below the levels
// left, as Check describes.
func checkValue(dec *json.Decoder, left int) *rawErr {
	tok, err := dec.Token()
	if err != nil {
		return &rawErr{err: err}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if left <= 0 {
		return &rawErr{err: ErrTooDeep}
	}
	switch d {
	case '[':
		for i := 0; dec.More(); i++ {
			if e := checkValue(dec, left-1); e != nil {
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
			f := FoldName(name)
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
			if e := checkValue(dec, left-1); e != nil {
				return e.in(pathSeg{name: name, index: -1})
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return &rawErr{err: err}
	}
	return nil
}
