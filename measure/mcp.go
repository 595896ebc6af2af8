package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

func (m *Measurer) measureMCP(ctx context.Context, mc *policy.MCPMeasurement, inputs map[string]any) (any, error) {
	if m.mcp == nil {
		return nil, &Error{Kind: ErrDeclaration, Err: errors.New("no MCP servers configured for measurements")}
	}
	args := make(map[string]any, len(mc.Args))
	for k, v := range mc.Args {
		filled, err := fillArg(v, inputs)
		if err != nil {
			return nil, err
		}
		args[k] = filled
	}
	raw, err := canonical.Marshal(args)
	if err != nil {
		return nil, &Error{Kind: ErrInput, Err: err}
	}
	client, err := m.mcp(ctx, mc.Server)
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Err: err}
	}
	res, result, err := client.Call(ctx, upstream.ToolCall{Tool: mc.Tool, Args: raw, Raw: true})
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Err: err}
	}
	if res.IsError {
		return nil, &Error{Kind: ErrTool, Err: errors.New("the tool reported an error")}
	}
	doc, err := structuredValue(res.StructuredContent, result)
	if err != nil {
		return nil, err
	}
	return Pointer(doc, mc.Pointer)
}

// structuredValue returns the tool result's structuredContent with numbers as json.Number
// holding the text the server sent. result is the exact bytes of the JSON-RPC result, nil when
// the client could not bind them to the call; decoded is the MCP client's float64 decoding.
//
// With the bytes, structuredContent is checked as an HTTP body is: duplicate names, invalid
// UTF-8 and any literal whose value a double cannot hold (9007199254740993, 8.000000000000001,
// 0.10000000000000000001) are an ErrResponse, and what is measured is the literal as written.
// The decoded value must then agree with the bytes, so that bytes of another answer can never
// stand in for this one. Without the bytes, see [integralNumbers].
func structuredValue(decoded any, result json.RawMessage) (any, error) {
	if result == nil {
		if decoded == nil {
			return nil, &Error{Kind: ErrTool, Err: errors.New("the tool returned no structured content")}
		}
		if err := integralNumbers(decoded); err != nil {
			return nil, &Error{Kind: ErrResponse, Err: err}
		}
		b, err := json.Marshal(decoded)
		if err != nil {
			return nil, &Error{Kind: ErrResponse, Err: err}
		}
		doc, err := canonical.Decode(b)
		if err != nil {
			return nil, &Error{Kind: ErrResponse, Err: err}
		}
		return doc, nil
	}
	sc, err := structuredMember(result)
	if err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	if sc == nil {
		if decoded != nil {
			return nil, &Error{Kind: ErrResponse, Err: errors.New("the result's bytes and its decoding disagree")}
		}
		return nil, &Error{Kind: ErrTool, Err: errors.New("the tool returned no structured content")}
	}
	doc, err := canonical.Decode(sc)
	if err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	if !sameValue(doc, decoded) {
		return nil, &Error{Kind: ErrResponse, Err: errors.New("the result's bytes and its decoding disagree")}
	}
	return doc, nil
}

// structuredMember returns the bytes of the result object's structuredContent member, nil if
// it is absent or null. The MCP client matches member names exactly, so only that spelling
// counts; a name given twice is refused, since which one the client kept is not known here.
func structuredMember(result []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(result))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("the result is not a JSON object")
	}
	var sc json.RawMessage
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		if tok != "structuredContent" {
			continue
		}
		if seen {
			return nil, errors.New("the result has structuredContent twice")
		}
		seen, sc = true, v
	}
	if string(sc) == "null" {
		return nil, nil
	}
	return sc, nil
}

// sameValue reports whether exact (canonical.Decode's value) and decoded (the MCP client's,
// numbers as float64) are the same JSON value, each number of exact decoding to the double of
// decoded.
func sameValue(exact, decoded any) bool {
	switch x := exact.(type) {
	case json.Number:
		d, ok := decoded.(float64)
		f, err := x.Float64()
		return ok && err == nil && f == d
	case string, bool, nil:
		// Comparable, so equal only to a decoded value of the same type and value.
		return exact == decoded
	case map[string]any:
		d, ok := decoded.(map[string]any)
		return ok && maps.EqualFunc(x, d, sameValue)
	case []any:
		d, ok := decoded.([]any)
		return ok && slices.EqualFunc(x, d, sameValue)
	}
	return false
}

// fillArg fills one argument template. A string that is exactly one placeholder takes the
// input's value with its type (an account number stays a string, an amount a number); a
// placeholder inside other text takes the input's text. Non-string values are sent as declared.
func fillArg(v any, inputs map[string]any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil
	}
	if m := placeholder.FindStringSubmatch(s); m != nil && m[0] == s {
		// inputText refuses an input that is not known, or not a scalar.
		if _, err := inputText(m[1], inputs); err != nil {
			return nil, err
		}
		return inputs[m[1]], nil
	}
	return fill(s, inputs, func(text string) string { return text })
}

// maxExact is 2^53, the first magnitude at which an integral double stops denoting one
// integer: the literal 9007199254740993 decodes to 2^53 exactly, so a decoded 2^53 may stand for
// a neighbour the server sent.
const maxExact = 1 << 53

// integralNumbers is the rule for a result whose bytes the MCP client could not bind to the
// call, so that only its float64 decoding is known: every number must be an integer of
// magnitude below 2^53. A fraction is refused, since a decimal of more than 15 significant
// digits may have arrived as a nearby double (8.000000000000001 as 8.000000000000002,
// 0.10000000000000000001 as 0.1) that is also the exact decoding of a shorter literal, and
// nothing left tells the two apart; so is an integral value at or beyond 2^53, which no longer
// denotes one integer. mcpgate refuses form answers by the same magnitude rule.
func integralNumbers(v any) error {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) {
			return errors.New("a fraction in a result whose bytes were not captured may have been rounded")
		}
		if math.Abs(x) >= maxExact {
			return fmt.Errorf("number %g is beyond the exactly representable range", x)
		}
	case map[string]any:
		for _, e := range x {
			if err := integralNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := integralNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}
