package askform

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/visible"
)

// elicitTypes are the primitive types an elicitation form can render, and elicitFormats the
// string formats the MCP form schema allows.
var (
	elicitTypes   = []string{"string", "number", "integer", "boolean"}
	elicitFormats = []string{"email", "uri", "date", "date-time"}
)

// elicitProperty reduces a question's JSON Schema to an MCP form property
// with title. Only keywords the form schema knows are kept; a schema that
// is not one primitive is not askable.
func elicitProperty(schema json.RawMessage, title string) (map[string]any, error) {
	var s map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, errors.New("no schema")
	}
	if err := dec.Decode(&s); err != nil || s == nil {
		return nil, errors.New("schema is not an object")
	}
	typ, _ := s["type"].(string)
	enum, hasEnum := s["enum"].([]any)
	if typ == "" && hasEnum && allStrings(enum) {
		typ = "string"
	}
	if !slices.Contains(elicitTypes, typ) {
		return nil, fmt.Errorf("type %v is not a form primitive", s["type"])
	}
	p := map[string]any{"type": typ, "title": title}
	var bounds []string
	switch typ {
	case "string":
		if hasEnum {
			if !allStrings(enum) {
				return nil, errors.New("enum of non-strings")
			}
			// The user picks a member as the host draws it, and the member is the answer:
			// one holding a character the host would not draw ("savings" and "savings" with a
			// zero-width space) cannot be told apart, so the question is not asked in a form.
			for _, m := range enum {
				if visible.Count(m.(string)) > 0 {
					return nil, fmt.Errorf("enum member %q holds characters a person does not see", m)
				}
			}
			p["enum"] = enum
		}
		bounds = []string{"minLength", "maxLength"}
		if f, ok := s["format"].(string); ok && slices.Contains(elicitFormats, f) {
			p["format"] = f
		}
	case "number", "integer":
		if hasEnum {
			return nil, errors.New("enum of numbers")
		}
		bounds = []string{"minimum", "maximum"}
	}
	for _, k := range bounds {
		if n, ok := s[k].(json.Number); ok {
			p[k] = n
		}
	}
	return p, nil
}

func allStrings(vs []any) bool {
	return len(vs) > 0 && !slices.ContainsFunc(vs, func(v any) bool { _, ok := v.(string); return !ok })
}

// renderShown writes what an approval approves in plain words: an
// argument object as "name: value" pairs in key order, anything else as
// its text.
func renderShown(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		keys := slices.Sorted(maps.Keys(t))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = Humanize(k) + ": " + renderValue(t[k])
		}
		return strings.Join(parts, "; ")
	default:
		return renderValue(t)
	}
}

func renderValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Humanize is a slot or argument name as a person reads it: its underscores
// as spaces ("to_account": "to account").
func Humanize(name string) string { return strings.ReplaceAll(name, "_", " ") }

// sanitizeKey makes a property name hosts render without surprises.
func sanitizeKey(s string) string {
	return cmp.Or(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s), "answer")
}
