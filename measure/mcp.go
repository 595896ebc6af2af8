package measure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
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
	res, err := client.Call(ctx, mc.Tool, raw)
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Err: err}
	}
	if res.IsError {
		return nil, &Error{Kind: ErrTool, Err: errors.New("the tool reported an error")}
	}
	if res.StructuredContent == nil {
		return nil, &Error{Kind: ErrTool, Err: errors.New("the tool returned no structured content")}
	}
	if err := exactNumbers(res.StructuredContent); err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	doc, err := canonical.Decode(b)
	if err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	return Pointer(doc, mc.Pointer)
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
		in, ok := inputs[m[1]]
		if !ok {
			return nil, &Error{Kind: ErrInput, Err: fmt.Errorf("%s is not known", m[1])}
		}
		if _, err := inputText(m[1], inputs); err != nil {
			return nil, err
		}
		return in, nil
	}
	var ferr error
	out := placeholder.ReplaceAllStringFunc(s, func(p string) string {
		t, err := inputText(placeholder.FindStringSubmatch(p)[1], inputs)
		if err != nil && ferr == nil {
			ferr = err
		}
		return t
	})
	return out, ferr
}

// maxExact is 2^53, the first magnitude at which an integral double stops denoting one
// integer: the literal 9007199254740993 decodes to 2^53 exactly, so a decoded 2^53 may stand for
// a neighbour the server sent.
const maxExact = 1 << 53

// exactNumbers refuses integral numbers the MCP client decoded at or beyond the magnitude where
// a double is exact: the text the server sent may have been rounded, and a comparison against a
// rounded balance is not a measurement. mcpgate refuses form answers by the same rule.
//
// A fraction cannot be checked this way. The MCP client decodes structuredContent to float64
// and keeps no bytes, so a decimal of more than 15 significant digits may arrive as a nearby
// double (8.000000000000001 as 8.000000000000002, 0.10000000000000000001 as 0.1) that is also
// the exact decoding of a shorter literal: nothing left here tells the two apart, and the value
// measured is the double's shortest decimal (see the package documentation).
func exactNumbers(v any) error {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) >= maxExact {
			return fmt.Errorf("number %g is beyond the exactly representable range", x)
		}
	case map[string]any:
		for _, e := range x {
			if err := exactNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := exactNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}
