package rawjson

import (
	"bytes"
	"io"
	"sync"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// soundReader is a reusable decoder for Sound.
type soundReader struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

// soundReaders keeps Sound's decoders between calls.
var soundReaders = sync.Pool{New: func() any { return new(soundReader) }}

// soundOptions read what encoding/json reads: invalid UTF-8 is no error, and
// repeated names are Sound's to find.
var soundOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// Sound reports whether Check(data, maxDepth) certainly finds nothing,
// without encoding/json's tokenizer (which allocates for every token). It
// answers true only for one JSON value and nothing after it, nested within
// maxDepth levels, whose member names are written without escapes in valid
// UTF-8 and differ, in each object, under FoldName. For anything else it
// answers false, which says only that Check must read the value.
func Sound(data []byte, maxDepth int) bool {
	q := soundReaders.Get().(*soundReader)
	q.buf = *bytes.NewBuffer(data)
	q.dec.Reset(&q.buf, soundOptions)
	ok := soundValue(&q.dec, data, maxDepth)
	if ok {
		_, err := q.dec.ReadToken()
		ok = err == io.EOF
	}
	q.buf = bytes.Buffer{} // keep no reference to data
	q.dec.Reset(&q.buf)
	soundReaders.Put(q)
	return ok
}

// soundValue reads one value for Sound, with left levels of nesting left.
func soundValue(dec *jsontext.Decoder, data []byte, left int) bool {
	switch dec.PeekKind() {
	case jsontext.KindInvalid:
		return false
	case jsontext.KindBeginArray:
		if left <= 0 {
			return false
		}
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		for dec.PeekKind() != jsontext.KindEndArray {
			if !soundValue(dec, data, left-1) {
				return false
			}
		}
	case jsontext.KindBeginObject:
		if left <= 0 {
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
				f := FoldName(string(name))
				if many[f] {
					return false
				}
				many[f] = true
			}
			if !soundValue(dec, data, left-1) {
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

// sameName reports whether FoldName(string(a)) == FoldName(string(b)),
// for names of valid UTF-8; two ASCII names are compared in place.
func sameName(a, b []byte) bool {
	if !isASCII(a) || !isASCII(b) {
		return FoldName(string(a)) == FoldName(string(b))
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
