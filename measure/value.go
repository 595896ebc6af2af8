package measure

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/verdictgate/verdict/internal/jsonptr"
)

// inputText is the text of a known scalar input for a template.
func inputText(name string, inputs map[string]any) (string, error) {
	v, ok := inputs[name]
	if !ok {
		return "", &Error{Kind: ErrInput, Err: fmt.Errorf("%s is not known", name)}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", &Error{Kind: ErrInput, Err: fmt.Errorf("%s is a %s, which cannot be written into a template", name, kindOf(v))}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case float64, float32:
		return "float"
	}
	return fmt.Sprintf("%T", v)
}

// isIndex reports whether tok is an array index as RFC 6901 writes it.
func isIndex(tok string) bool {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}

// Pointer returns the value at the RFC 6901 JSON pointer in doc ("" is the whole document).
// A pointer that leads nowhere is an error of kind ErrPointer; a JSON null at the pointer is a
// value.
func Pointer(doc any, pointer string) (any, error) {
	toks, err := jsonptr.Split(pointer)
	if err != nil {
		return nil, &Error{Kind: ErrPointer, Err: err}
	}
	v := doc
	for _, tok := range toks {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, &Error{Kind: ErrPointer, Err: fmt.Errorf("%q: no member %q", pointer, tok)}
			}
			v = next
		case []any:
			// RFC 6901 writes an index as 0 or digits without a leading zero: no sign, so "-0"
			// and "+1", which strconv reads, name no element.
			i, err := strconv.Atoi(tok)
			if err != nil || !isIndex(tok) || i >= len(x) {
				return nil, &Error{Kind: ErrPointer, Err: fmt.Errorf("%q: no element %q", pointer, tok)}
			}
			v = x[i]
		default:
			return nil, &Error{Kind: ErrPointer, Err: fmt.Errorf("%q leads into a %s", pointer, kindOf(v))}
		}
	}
	return v, nil
}
