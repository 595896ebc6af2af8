package canonical

import (
	"bytes"
	"encoding/json"
)

// Decode validates data as [Validate] does and then decodes it, with numbers
// as json.Number holding the text written, objects as map[string]any and
// arrays as []any.
func Decode(data []byte) (any, error) { return Options{}.Decode(data) }

// Decode validates data as [Options.Validate] does and then decodes it; see
// the package-level [Decode].
func (o Options) Decode(data []byte) (any, error) {
	if err := o.Validate(data); err != nil {
		return nil, err
	}
	// Validation already refused everything encoding/json would repair or
	// accept silently (duplicate names, invalid UTF-8, lone surrogates), so
	// its result is the value validated.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, newError(CodeInvalidJSON, int(dec.InputOffset()), "cannot decode: "+err.Error())
	}
	return v, nil
}
