// Package confx owns how the daemons read their YAML config files: strictly (an unknown or
// misspelt key is an error, never silently ignored), with Go duration strings, and with every
// problem at its file, line and column, so that an operator goes straight to the line to fix.
package confx

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/yamlpos"
)

// Error is one problem of a config file, at the place it was found.
type Error struct {
	File string
	// Line and Column are 1-based; Line is 0 when the problem has no place in the file (a
	// required key that is missing from the top level), Column 0 when only the line is known.
	Line, Column int
	// Path is the key path of the value, e.g. servers.bank.command[0] or tools["bank/transfer"];
	// "" for the file as a whole.
	Path string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if pos := (yamlpos.Pos{Line: e.Line, Column: e.Column}).String(); pos != "" {
		b.WriteString(":")
		b.WriteString(pos)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// UnknownFieldError is a key that names no field where it stands.
type UnknownFieldError struct {
	Name string
	// Suggestion is the known key Name is closest to, "" when none is close.
	Suggestion string
}

func (e *UnknownFieldError) Error() string {
	msg := fmt.Sprintf("unknown field %q", e.Name)
	switch {
	case e.Suggestion == "":
	case strings.EqualFold(e.Name, e.Suggestion):
		msg += fmt.Sprintf(" (did you mean %q? keys are case-sensitive)", e.Suggestion)
	default:
		msg += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return msg
}

// ErrKeyCase is matched by the error for a key that differs from a field's only in case: keys
// are case-sensitive, and a near miss is a mistake to name, never a key to accept.
var ErrKeyCase = errors.New("key differs from a field name only in case")

// Unwrap makes a key that differs from a field only in case match ErrKeyCase.
func (e *UnknownFieldError) Unwrap() error {
	if e.Suggestion != "" && strings.EqualFold(e.Name, e.Suggestion) {
		return ErrKeyCase
	}
	return nil
}

// PathError is a problem a Validate method found with the value at Path. LoadValid reports it
// at the file, line and column of that value; a missing key at those of the nearest value that
// is there.
type PathError struct {
	Path string // in the notation of Key and Index
	Err  error
	// Named says Err's message names the value itself ("clock_skew 1h exceeds the 1m limit"):
	// Path only places it, and is not said again.
	Named bool
}

func (e *PathError) Error() string {
	if e.Named {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

// At says err is about the value at path. A *PathError inside a section's check becomes one
// under path: At("nonce_store", At("endpoints[0]", err)) is about nonce_store.endpoints[0].
// Joined errors (errors.Join) are placed one by one.
func At(path string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		// A section's joined problems stay one problem each, each at its own key.
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, At(path, e))
		}
		return errors.Join(errs...)
	}
	if pe, ok := err.(*PathError); ok {
		return &PathError{Path: yamlpos.Join(path, pe.Path), Err: pe.Err, Named: pe.Named}
	}
	return &PathError{Path: path, Err: err}
}

// Place says err is about the value at path, when err's message names that value already: the
// message stays as it is, and LoadValid puts it at the value's place in the file.
func Place(path string, err error) error {
	if err == nil {
		return nil
	}
	return &PathError{Path: path, Err: err, Named: true}
}

// Errorf is At(path, fmt.Errorf(format, args...)).
func Errorf(path, format string, args ...any) error {
	return &PathError{Path: path, Err: fmt.Errorf(format, args...)}
}

// Key appends the map key k to a key path: .name for an identifier, ["name"] otherwise.
func Key(path, k string) string { return yamlpos.Key(path, k) }

// Index appends the list index i to a key path.
func Index(path string, i int) string { return yamlpos.Index(path, i) }

// load reads the YAML (or JSON) file at path into v, refusing unknown keys, duplicate keys and
// keys that match a field only up to case. Every problem found is reported, each an *Error with
// its place in the file; an unknown key close to a known one says which.
func load(path string, v any) (*yaml.Node, error) {
	data, err := opfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	root, err := yamlpos.Parse(data)
	if err != nil {
		if se, ok := errors.AsType[*yamlpos.SyntaxError](err); ok {
			return nil, &Error{File: path, Line: se.Line, Err: errors.New(se.Msg)}
		}
		return nil, &Error{File: path, Err: err}
	}
	// What the strict decode below refuses, found first on the document itself, where each
	// problem has its place.
	var problems []error
	for _, d := range yamlpos.Duplicates(root) {
		problems = append(problems, &Error{File: path, Line: d.At.Line, Column: d.At.Column, Path: d.Path,
			Err: fmt.Errorf("key %q already set at line %d", d.Key, d.First.Line)})
	}
	c := checker{file: path}
	if root != nil {
		c.value(root, typeOf(v), "")
	}
	if problems = append(problems, c.problems...); len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	// The decode itself stays the conversion the configs have always had, and the authority:
	// anything the check above let through that it refuses is still refused, naming the file.
	js, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	if err := unmarshalStrict(js, v); err != nil {
		return nil, &Error{File: path, Err: err}
	}
	return root, nil
}

// LoadValid reads the config file at path strictly (see load) and validates it, so that every
// daemon refuses a config the same way: every problem is an *Error naming the file, and the line
// and column when Validate said which value it is about (see At).
func LoadValid[T any, P interface {
	*T
	Validate() error
}](path string) (*T, error) {
	var c T
	root, err := load(path, &c)
	if err != nil {
		return nil, err
	}
	if err := P(&c).Validate(); err != nil {
		return nil, locate(path, root, err)
	}
	return &c, nil
}

// Locate places the problems of err in the config file at path as LoadValid places Validate's
// (each *PathError at its key), for checks that need more than the file itself, such as another
// file it names. A file that no longer reads leaves them without a line.
func Locate(path string, err error) error {
	var root *yaml.Node
	if data, rerr := os.ReadFile(path); rerr == nil {
		root, _ = yamlpos.Parse(data)
	}
	return locate(path, root, err)
}

// locate turns each of Validate's errors into an *Error at its place in the file.
func locate(file string, root *yaml.Node, err error) error {
	var out []error
	var each func(error)
	each = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				each(e)
			}
			return
		}
		pe, ok := errors.AsType[*PathError](err)
		if !ok {
			out = append(out, &Error{File: file, Err: err})
			return
		}
		pos, _ := yamlpos.Find(root, pe.Path)
		e := &Error{File: file, Line: pos.Line, Column: pos.Column, Path: pe.Path, Err: pe.Err}
		if pe.Named {
			e.Path = ""
		}
		out = append(out, e)
	}
	each(err)
	return errors.Join(out...)
}

// Duration is a time.Duration written as a Go duration string ("30s", "10m").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string. Bare numbers are refused: "30" could mean seconds or
// nanoseconds, and a security timeout must not be guessed.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration { return cmp.Or(time.Duration(d), def) }

// unmarshalStrict decodes a config converted to JSON: member names match exactly, an unknown
// or duplicate member is an error, and a value of type any (pre-set data) keeps its numbers'
// exact text, so that a number no float64 holds is refused where it is used, never rounded.
func unmarshalStrict(js []byte, v any) error {
	return jsonv2.Unmarshal(js, v, jsonv2.RejectUnknownMembers(true), apijson.ExactNumbers)
}
