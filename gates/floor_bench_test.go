package gates

import (
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// orderBookSchema is BenchmarkPreflight's tool schema.
const orderBookSchema = `{
	"type": "object",
	"properties": {
		"isbn": {"type": "string", "pattern": "^(97[89])?[0-9]{9}[0-9X]$"},
		"title": {"type": "string", "maxLength": 200},
		"author": {"type": "string", "maxLength": 200},
		"quantity": {"type": "integer", "minimum": 1, "maximum": 10},
		"shipping": {"type": "string", "enum": ["standard", "express"]},
		"gift_note": {"type": "string", "maxLength": 100}
	},
	"required": ["quantity", "shipping"],
	"oneOf": [{"required": ["isbn"]}, {"required": ["title", "author"]}],
	"additionalProperties": false
}`

// BenchmarkFloorSchemaValidate is the floor a preflight sits on: one JSON Schema 2020-12
// validation of the finished call against the tool's input schema, compiled once, with nothing
// else a preflight does (no request, no slots, no sources, no digest). "order_book" is
// BenchmarkPreflight's call; "slots=N" is BenchmarkPreflightSlots' call of the same width.
func BenchmarkFloorSchemaValidate(b *testing.B) {
	b.Run("order_book", func(b *testing.B) {
		benchValidate(b, orderBookSchema, `{"isbn":"9780262033848","quantity":2,"shipping":"express","gift_note":"happy birthday"}`)
	})
	for _, n := range slotCounts {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			in := wideInput(b, n)
			var call strings.Builder
			call.WriteByte('{')
			for i := range n {
				if i > 0 {
					call.WriteByte(',')
				}
				fmt.Fprintf(&call, `"f%03d":"value-%03d"`, i, i)
			}
			call.WriteByte('}')
			benchValidate(b, string(in.Tool.InputSchema), call.String())
		})
	}
}

func benchValidate(b *testing.B, schema, call string) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		b.Fatal(err)
	}
	s, err := compileSchema(doc)
	if err != nil {
		b.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(call))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}
