// Package jsonptr reads RFC 6901 JSON pointers, by one rule for every place a pointer is
// written: a policy's measurements, tool schemas' $ref, and the audit export's mask rules.
package jsonptr

import (
	"errors"
	"strconv"
	"strings"
)

// ErrSyntax is the kind of error Split returns: the string is not a JSON pointer.
var ErrSyntax = errors.New("not an RFC 6901 JSON pointer")

// Split returns the reference tokens of the RFC 6901 JSON pointer p, unescaped: "~1"
// reads as "/" and "~0" as "~". The empty pointer, the whole document, has none.
//
// A pointer that does not start with "/", or holds a "~" followed by anything but "0" or "1",
// is refused rather than read some way of our own: a pointer names one value, and a pointer
// another implementation would read differently does not.
func Split(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, &pointerError{p, "does not start with /"}
	}
	toks := strings.Split(p[1:], "/")
	for i, tok := range toks {
		if !strings.Contains(tok, "~") {
			continue
		}
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || tok[j+1] != '0' && tok[j+1] != '1') {
				return nil, &pointerError{p, `holds a "~" that is not "~0" or "~1"`}
			}
		}
		// "~1" first, then "~0", as RFC 6901 §4 orders it: "~01" is "~1", not "/".
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

type pointerError struct{ pointer, why string }

func (e *pointerError) Error() string {
	return "JSON pointer " + strconv.Quote(e.pointer) + " " + e.why
}
func (e *pointerError) Unwrap() error { return ErrSyntax }
