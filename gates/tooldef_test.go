package gates

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/verdictgate/verdict/canonical"
)

// compileFragment compiles one subschema of doc on its own compiler, with the same rules as
// compileSchema: the way property validators were built before they were taken from the
// whole compile, kept here as the reference they must agree with.
func compileFragment(t *testing.T, doc any, pointer ...string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		t.Fatal(err)
	}
	var frag strings.Builder
	for _, tok := range pointer {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
		frag.WriteString("/" + url.PathEscape(tok))
	}
	s, err := c.Compile(schemaURL + "#" + frag.String())
	if err != nil {
		t.Fatalf("reference compile of %v: %v", pointer, err)
	}
	return s
}

// Every property validator accepts exactly what the property's schema compiled on its own
// accepts: same draft, same local references, same format assertions.
func TestPropertyValidatorsMatchSeparateCompile(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		at     []string // the pointer to the object schema declaring the properties
		values []string
	}{
		{
			name: "2020-12 default, formats asserted",
			schema: `{"type":"object","properties":{
				"isbn":{"type":"string","pattern":"^(97[89])?[0-9]{9}[0-9X]$"},
				"qty":{"type":"integer","minimum":1,"maximum":10},
				"when":{"type":"string","format":"date"},
				"mail":{"type":"string","format":"email"},
				"ship":{"enum":["standard","express"]},
				"any":true, "none":false, "empty":{}}}`,
			values: []string{`"9780262033848"`, `"978026203384"`, `2`, `11`, `2.5`, `"2026-11-30"`, `"2026-13-40"`,
				`"a@b.example"`, `"not mail"`, `"express"`, `"Express"`, `null`, `{}`, `[1]`},
		},
		{
			name: "draft-07 declared, local $ref",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
				"definitions":{"addr":{"type":"string","format":"email"},"n":{"type":"integer","maximum":5}},
				"properties":{"to":{"$ref":"#/definitions/addr"},"n":{"$ref":"#/definitions/n","description":"ignored beside $ref"},
				"s":{"type":"string","maxLength":3}}}`,
			values: []string{`"a@b.example"`, `"bob"`, `4`, `6`, `"abc"`, `"abcd"`},
		},
		{
			name: "2020-12 $ref chain and a nested object",
			schema: `{"type":"object","$defs":{"n":{"$ref":"#/$defs/m"},"m":{"type":"integer","maximum":5},
				"o":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}},
				"properties":{"n":{"$ref":"#/$defs/n"},"o":{"$ref":"#/$defs/o"}}}`,
			values: []string{`1`, `6`, `"3"`, `{"k":"v"}`, `{"k":1}`, `{}`},
		},
		{
			name:   "names that are not URL- or pointer-safe",
			schema: `{"type":"object","properties":{"50%":{"type":"integer"},"%41":{"type":"string"},"a/b~c":{"maxLength":2},"a b#c?":{"type":"boolean"},"é":{"const":1}}}`,
			values: []string{`1`, `"x"`, `"xyz"`, `true`, `1.0`},
		},
		{
			name:   "root $ref to the object schema",
			schema: `{"$ref":"#/$defs/T","$defs":{"T":{"type":"object","properties":{"a":{"type":"string","minLength":2}}}}}`,
			at:     []string{"$defs", "T"},
			values: []string{`"a"`, `"ab"`, `3`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := compileDefinition(Tool{Name: "t", InputSchema: json.RawMessage(tt.schema)})
			if err != nil {
				t.Fatal(err)
			}
			if d.unsupported != "" {
				t.Fatalf("unsupported: %s", d.unsupported)
			}
			doc, err := canonical.Decode([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.propOrder) == 0 {
				t.Fatal("no properties")
			}
			for _, name := range d.propOrder {
				ref := compileFragment(t, doc, append(append([]string{}, tt.at...), "properties", name)...)
				for _, raw := range tt.values {
					v, err := canonical.Decode([]byte(raw))
					if err != nil {
						t.Fatal(err)
					}
					got, want := d.props[name].validator.Validate(v), ref.Validate(v)
					if (got == nil) != (want == nil) {
						t.Errorf("property %q, value %s: validator says %v, separate compile says %v", name, raw, got, want)
					}
					if got != nil && want != nil {
						gd, gl := validationDetail(got)
						wd, wl := validationDetail(want)
						if gd != wd || fmt.Sprint(gl) != fmt.Sprint(wl) {
							t.Errorf("property %q, value %s: detail %q at %v, separate compile %q at %v", name, raw, gd, gl, wd, wl)
						}
					}
				}
			}
		})
	}
}

// A definition past a bound is marked schema_unsupported with the bound in its detail, and one
// at the bound still compiles.
func TestDefinitionBounds(t *testing.T) {
	props := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"f%d":{"type":"string"}`, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	// nodes builds a schema of exactly n objects and booleans: three objects (the root, its
	// properties, one property) and an enum of n-3 booleans, which count too.
	nodes := func(n int) string {
		return `{"type":"object","properties":{"x":{"enum":[` + strings.Repeat(`true,`, n-4) + `true]}}}`
	}
	// padded is a valid schema of exactly n bytes.
	padded := func(n int) string {
		head, tail := `{"type":"object","description":"`, `"}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	tests := []struct {
		name   string
		schema string
		detail string // "" when the definition must compile
	}{
		{"properties at the bound", props(MaxSchemaProperties), ""},
		{"properties past the bound", props(MaxSchemaProperties + 1), fmt.Sprintf("inputSchema declares %d properties, more than the %d supported", MaxSchemaProperties+1, MaxSchemaProperties)},
		{"nodes at the bound", nodes(MaxSchemaNodes), ""},
		{"nodes past the bound", nodes(MaxSchemaNodes + 1), fmt.Sprintf("inputSchema has more than %d objects and booleans", MaxSchemaNodes)},
		{"bytes at the bound", padded(MaxInputSchemaBytes), ""},
		{"bytes past the bound", padded(MaxInputSchemaBytes + 1), fmt.Sprintf("inputSchema is %d bytes, more than the %d supported", MaxInputSchemaBytes+1, MaxInputSchemaBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := compileDefinition(Tool{Name: "t", InputSchema: json.RawMessage(tt.schema)})
			if err != nil {
				t.Fatal(err)
			}
			if d.unsupported != tt.detail {
				t.Fatalf("unsupported = %q, want %q", d.unsupported, tt.detail)
			}
			if tt.detail == "" && d.whole == nil {
				t.Fatal("no compiled schema")
			}
		})
	}
}

// Concurrent runs that need one new definition share one compilation.
func TestDefCacheSharesCompilation(t *testing.T) {
	var c defCache
	tool := Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)}
	const n = 16
	got := make([]*definition, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.get(tool)
			if err != nil {
				t.Error(err)
			}
			got[i] = d
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("run %d got definition %p, run 0 got %p", i, got[i], got[0])
		}
	}
	other := tool
	other.Description = "[Notice] changed"
	if d, err := c.get(other); err != nil || d == got[0] {
		t.Fatalf("a changed definition must compile anew: %p, %v", d, err)
	}
}

// A definition found by its name is the one compiled from exactly the same bytes: a changed
// description or schema, even one changed in place in the caller's buffer, compiles anew, and
// two tools of one name each get their own.
func TestDefCacheByName(t *testing.T) {
	var c defCache
	schemaA := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`
	schemaB := `{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}`
	buf := []byte(schemaA)
	first, err := c.get(Tool{Name: "t", InputSchema: buf})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tool Tool
		same bool // the definition compiled first
		prop string
	}{
		{"same buffer", Tool{Name: "t", InputSchema: buf}, true, "a"},
		{"equal copy", Tool{Name: "t", InputSchema: []byte(schemaA)}, true, "a"},
		{"other description", Tool{Name: "t", Description: "[Notice] n", InputSchema: []byte(schemaA)}, false, "a"},
		{"other schema", Tool{Name: "t", InputSchema: []byte(schemaB)}, false, "b"},
		{"back to the first", Tool{Name: "t", InputSchema: []byte(schemaA)}, true, "a"},
		{"other name", Tool{Name: "u", InputSchema: []byte(schemaA)}, false, "a"},
		{"first again", Tool{Name: "t", InputSchema: buf}, true, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := c.get(tt.tool)
			if err != nil {
				t.Fatal(err)
			}
			if (d == first) != tt.same {
				t.Fatalf("same definition as the first: %v, want %v", d == first, tt.same)
			}
			if d.props[tt.prop] == nil {
				t.Fatalf("definition lacks property %q", tt.prop)
			}
		})
	}
	// The caller's buffer changed in place: the cached copy no longer matches it.
	copy(buf, schemaB)
	d, err := c.get(Tool{Name: "t", InputSchema: buf})
	if err != nil {
		t.Fatal(err)
	}
	if d == first || d.props["b"] == nil {
		t.Fatalf("a buffer changed in place must not find the old definition")
	}
}
