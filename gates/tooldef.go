package gates

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/jsonptr"
	"github.com/verdictgate/verdict/internal/suggest"
	"github.com/verdictgate/verdict/policy"
)

// Tool is an MCP tool definition as listed by its server.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// ToolDigest is the verdict's `tsd`: exactly [canonical.ToolDefinitionDigest] of the tool's
// name, description and inputSchema, the digest the executor computes from its own listing.
// Annotations are not part of it: they never shape the gate.
func ToolDigest(t Tool) (string, error) {
	d, err := canonical.ToolDefinitionDigest(t.Name, t.Description, t.InputSchema)
	if err != nil {
		return "", fmt.Errorf("tool digest: %w", err)
	}
	return d, nil
}

// definition is everything derived from one tool definition, computed once per definition.
type definition struct {
	digest        string
	labels        policy.Labels
	labelErr      error
	requiredLabel map[string]bool // the names of labels.Required
	unsupported   string          // non-empty: the schema cannot be reduced to slots
	shape         shape
	props         map[string]*property
	propOrder     []string
	names         []string // every name the shape can require, then every declared property
	whole         *jsonschema.Schema
}

// property is one declared argument.
type property struct {
	name      string
	rule      groundRule
	schema    json.RawMessage // the resolved property schema, for questions
	validator *jsonschema.Schema
	// title and description are the schema's own words for the argument, for questions.
	title, description string
}

// shape is what decides which arguments are required.
type shape struct {
	base     []string
	combo    string // "", "oneOf" or "anyOf"
	branches [][]string
	ifProp   string
	ifValues []any // the discriminator values that make the if-schema true
	then     []string
	els      []string
}

// names returns every argument name the shape can require, in first-seen order, then the names
// of declared it does not name.
func (s *shape) names(declared []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(ns ...string) {
		for _, n := range ns {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	add(s.base...)
	for _, b := range s.branches {
		add(b...)
	}
	if s.ifProp != "" {
		add(s.ifProp)
	}
	add(s.then...)
	add(s.els...)
	add(declared...)
	return out
}

// defCache holds definitions keyed by a hash of the raw definition bytes, so a run with an
// unchanged tool neither re-canonicalizes nor recompiles its schema. Concurrent runs that need
// the same new definition (the burst after a catalog refresh) share one compilation.
//
// Hashing the definition costs more than the rest of looking it up, and a daemon passes the same
// definition run after run: byName keeps each tool name's latest entry with a copy of its bytes,
// and a run whose definition equals them byte for byte takes that entry without hashing.
type defCache struct {
	mu     sync.Mutex
	m      map[[32]byte]*defEntry
	byName map[string]*defEntry
}

// defEntry is one definition, compiled or being compiled; done is closed once d and err are set.
// description and schema are copies of what it was compiled from, and its key in byName its name.
type defEntry struct {
	done        chan struct{}
	d           *definition
	err         error
	description string
	schema      []byte
}

const maxCachedDefs = 4096

func (c *defCache) get(t Tool) (*definition, error) {
	c.mu.Lock()
	if e, ok := c.byName[t.Name]; ok && e.description == t.Description && bytes.Equal(e.schema, t.InputSchema) {
		c.mu.Unlock()
		<-e.done
		return e.d, e.err
	}
	c.mu.Unlock()
	h := sha256.New()
	for _, part := range [][]byte{[]byte(t.Name), []byte(t.Description), t.InputSchema} {
		var n [8]byte
		for i, l := 0, len(part); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write(part)
	}
	var k [32]byte
	h.Sum(k[:0])
	c.mu.Lock()
	if e, ok := c.m[k]; ok {
		c.byName[t.Name] = e
		c.mu.Unlock()
		<-e.done
		return e.d, e.err
	}
	if c.m == nil || len(c.m) >= maxCachedDefs {
		c.m = map[[32]byte]*defEntry{}
		c.byName = map[string]*defEntry{}
	}
	e := &defEntry{done: make(chan struct{}), description: t.Description, schema: bytes.Clone(t.InputSchema)}
	c.m[k] = e
	c.byName[t.Name] = e
	c.mu.Unlock()

	defer func() {
		if e.d == nil && e.err == nil {
			// compileDefinition panicked: the runs waiting on it fail instead of hanging.
			e.err = errors.New("tool definition compilation failed")
		}
		if e.err != nil {
			// Not kept: only the runs already waiting see this error.
			c.mu.Lock()
			if c.m[k] == e {
				delete(c.m, k)
			}
			if c.byName[t.Name] == e {
				delete(c.byName, t.Name)
			}
			c.mu.Unlock()
		}
		close(e.done)
	}()
	e.d, e.err = compileDefinition(t)
	return e.d, e.err
}

// Bounds on a tool definition. A tool server controls its schema, and compiling one costs time
// that grows faster than its size (the JSON Schema compiler is quadratic in the number of
// subschemas), so a definition past these bounds is schema_unsupported instead of stalling every
// preflight that has to compile it. Each is far beyond any real tool: a 200-argument form is
// about 25 KB and 200 objects.
const (
	// MaxInputSchemaBytes bounds the raw inputSchema.
	MaxInputSchemaBytes = 1 << 20
	// MaxSchemaProperties bounds the arguments a tool may declare.
	MaxSchemaProperties = 1024
	// MaxSchemaNodes bounds the JSON objects and booleans anywhere in the inputSchema: every
	// subschema is one of them, so it bounds what the compiler has to build.
	MaxSchemaNodes = 4096
)

// countSchemaNodes counts the objects and booleans in a decoded document, stopping once it
// reaches limit.
func countSchemaNodes(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n >= limit {
			return
		}
		switch x := v.(type) {
		case bool:
			n++
		case map[string]any:
			n++
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return n
}

// compileDefinition derives a definition. Only a tool whose digest cannot be computed is an
// error; a bad schema or label is recorded on the definition, never a load failure.
func compileDefinition(t Tool) (*definition, error) {
	dg, err := ToolDigest(t)
	if err != nil {
		return nil, err
	}
	d := &definition{digest: dg, props: map[string]*property{}}
	d.labels, d.labelErr = policy.ParseLabels(t.Description)
	d.requiredLabel = make(map[string]bool, len(d.labels.Required))
	for _, n := range d.labels.Required {
		d.requiredLabel[n] = true
	}
	if len(bytes.TrimSpace(t.InputSchema)) == 0 || bytes.Equal(bytes.TrimSpace(t.InputSchema), []byte("null")) {
		d.unsupported = "inputSchema missing"
		return d, nil
	}
	if n := len(t.InputSchema); n > MaxInputSchemaBytes {
		d.unsupported = fmt.Sprintf("inputSchema is %d bytes, more than the %d supported", n, MaxInputSchemaBytes)
		return d, nil
	}
	doc, err := canonical.Decode(t.InputSchema)
	if err != nil {
		d.unsupported = "inputSchema is not valid JSON: " + err.Error()
		return d, nil
	}
	if n := countSchemaNodes(doc, MaxSchemaNodes+1); n > MaxSchemaNodes {
		d.unsupported = fmt.Sprintf("inputSchema has more than %d objects and booleans", MaxSchemaNodes)
		return d, nil
	}
	if reason := d.analyze(doc); reason != "" {
		d.unsupported = reason
		return d, nil
	}
	whole, err := compileSchema(doc)
	if err != nil {
		d.unsupported = "inputSchema does not compile: " + err.Error()
		return d, nil
	}
	d.whole = whole
	// Each property's validator is the subschema the whole compile already built: compiling
	// every property on its own would revalidate and recompile the whole document once per
	// property, which is quadratic in the tool's width.
	obj := objectSchema(whole)
	for _, name := range d.propOrder {
		v := obj.Properties[name]
		if v == nil {
			d.unsupported = fmt.Sprintf("property %q does not compile", name)
			return d, nil
		}
		d.props[name].validator = v
	}
	return d, nil
}

// objectSchema follows the root's local $refs to the object schema that declares the
// properties, as analyze did on the raw document (which bounded the chain).
func objectSchema(s *jsonschema.Schema) *jsonschema.Schema {
	for hops := 0; s.Ref != nil && hops <= maxRefHops; hops++ {
		s = s.Ref
	}
	return s
}

const schemaURL = "urn:verdict:tool-input-schema"

// refuseLoader refuses every external reference: a tool schema is untrusted input, and
// resolving file:// or network references would let it read or fetch anything.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("external schema references are refused")
}

// compileSchema compiles a whole input schema: 2020-12 unless it declares another draft, format
// assertions on, every external reference refused.
func compileSchema(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// Keywords that would decide what is required in a way the materializer cannot reduce.
var irreducible = []string{"not", "allOf", "dependentSchemas", "dependentRequired", "dependencies",
	"patternProperties", "unevaluatedProperties", "$dynamicRef", "$recursiveRef"}

// annotations may sit beside required in a branch without changing what it requires.
var branchKeys = map[string]bool{"required": true, "properties": true, "type": true, "title": true,
	"description": true, "$comment": true, "default": true, "examples": true}

// analyze reduces the root schema to a shape and a property table, or returns why it cannot.
func (d *definition) analyze(doc any) string {
	root, ok := doc.(map[string]any)
	if !ok {
		return "inputSchema is not an object schema"
	}
	r := resolver{root: root}
	obj, err := r.follow(root)
	if err != nil {
		return err.Error()
	}
	if why := rootRef(root); why != "" {
		return why
	}
	if t, has := obj["type"]; has && t != "object" {
		return "inputSchema type must be object"
	}
	if bad := present(obj, irreducible); bad != "" {
		return "unsupported keyword on a required path: " + bad
	}
	if why := d.properties(r, obj); why != "" {
		return why
	}
	sh, why := r.requiredShape(obj)
	if why != "" {
		return why
	}
	d.shape = sh
	d.names = sh.names(d.propOrder)
	return ""
}

// rootRef says why a root that is a $ref cannot be reduced: it may only point at the object
// schema, with nothing beside it that decides what is required.
func rootRef(root map[string]any) string {
	if _, viaRef := root["$ref"]; !viaRef {
		return ""
	}
	if bad := present(root, irreducible); bad != "" {
		return "unsupported keyword on a required path: " + bad
	}
	if k := present(root, []string{"required", "properties", "oneOf", "anyOf", "if"}); k != "" {
		return "root $ref beside " + k + " is not supported"
	}
	return ""
}

// properties fills the property table from obj's properties, in name order, or returns why it
// cannot.
func (d *definition) properties(r resolver, obj map[string]any) string {
	props, has := obj["properties"]
	if !has {
		return ""
	}
	pm, ok := props.(map[string]any)
	if !ok {
		return "properties is not an object"
	}
	if len(pm) > MaxSchemaProperties {
		return fmt.Sprintf("inputSchema declares %d properties, more than the %d supported", len(pm), MaxSchemaProperties)
	}
	for _, n := range slices.Sorted(maps.Keys(pm)) {
		ps, err := r.follow(pm[n])
		if err != nil {
			return fmt.Sprintf("property %q: %v", n, err)
		}
		if ps == nil { // a boolean schema
			ps = map[string]any{}
		}
		raw, err := json.Marshal(ps)
		if err != nil {
			return fmt.Sprintf("property %q: %v", n, err)
		}
		title, _ := ps["title"].(string)
		desc, _ := ps["description"].(string)
		d.props[n] = &property{name: n, rule: ruleFor(ps), schema: raw, title: title, description: desc}
		d.propOrder = append(d.propOrder, n)
	}
	return ""
}

// requiredShape reduces what obj requires: its required names, and at most one of oneOf, anyOf and
// if/then/else deciding more. It returns why when it cannot.
func (r resolver) requiredShape(obj map[string]any) (shape, string) {
	var sh shape
	if req, has := obj["required"]; has {
		names, ok := stringList(req)
		if !ok {
			return sh, "required is not a list of names"
		}
		sh.base = names
	}
	combos := 0
	for _, k := range []string{"oneOf", "anyOf", "if"} {
		if _, has := obj[k]; has {
			combos++
		}
	}
	if combos > 1 {
		return sh, "only one of oneOf, anyOf and if may decide the required set"
	}
	_, hasThen := obj["then"]
	_, hasElse := obj["else"]
	if _, hasIf := obj["if"]; !hasIf && (hasThen || hasElse) {
		return sh, "then/else without if"
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if v, has := obj[k]; has {
			if why := r.branches(&sh, k, v); why != "" {
				return sh, why
			}
		}
	}
	if v, has := obj["if"]; has {
		if err := r.ifThenElse(&sh, v, obj["then"], obj["else"]); err != nil {
			return sh, err.Error()
		}
	}
	return sh, ""
}

// branches reduces the branches of the combinator k (oneOf or anyOf) to the names each
// requires, or returns why it cannot.
func (r resolver) branches(sh *shape, k string, v any) string {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return k + " must be a non-empty list"
	}
	sh.combo = k
	for i, b := range list {
		req, err := r.requiredForm(b)
		if err != nil {
			return fmt.Sprintf("%s[%d]: %v", k, i, err)
		}
		if len(req) == 0 {
			return fmt.Sprintf("%s[%d] requires nothing", k, i)
		}
		sh.branches = append(sh.branches, req)
	}
	return ""
}

func present(obj map[string]any, keys []string) string {
	for _, k := range keys {
		if _, has := obj[k]; has {
			return k
		}
	}
	return ""
}

func stringList(v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(a))
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// maxRefHops bounds a chain of local $refs.
const maxRefHops = 32

// resolver follows local $refs within one schema document.
type resolver struct{ root map[string]any }

// follow returns the object schema v denotes after local $refs; nil for a boolean schema.
func (r resolver) follow(v any) (map[string]any, error) {
	for hops := 0; ; hops++ {
		if hops > maxRefHops {
			return nil, errors.New("$ref chain too long")
		}
		switch x := v.(type) {
		case bool:
			return nil, nil
		case map[string]any:
			ref, has := x["$ref"]
			if !has {
				return x, nil
			}
			s, ok := ref.(string)
			if !ok || !strings.HasPrefix(s, "#") {
				return nil, fmt.Errorf("only local $ref is supported, got %v", ref)
			}
			for k := range x {
				if k != "$ref" && !branchKeys[k] && k != "$defs" && k != "definitions" && k != "$schema" && k != "$id" {
					return nil, fmt.Errorf("$ref beside %s is not supported", k)
				}
			}
			target, err := r.pointer(strings.TrimPrefix(s, "#"))
			if err != nil {
				return nil, err
			}
			v = target
		default:
			return nil, fmt.Errorf("schema is a %T", v)
		}
	}
}

func (r resolver) pointer(p string) (any, error) {
	var cur any = r.root
	if p == "" {
		return cur, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("$ref %q: anchors are not supported", "#"+p)
	}
	toks, err := jsonptr.Split(p)
	if err != nil {
		return nil, fmt.Errorf("$ref %q: %w", "#"+p, err)
	}
	for _, tok := range toks {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", "#"+p)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", "#"+p)
		}
	}
	return cur, nil
}

// requiredForm reads a branch that only lists required names.
func (r resolver) requiredForm(v any) ([]string, error) {
	obj, err := r.follow(v)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("boolean branch")
	}
	for k := range obj {
		if !branchKeys[k] {
			return nil, fmt.Errorf("branch is not a pure required form (%s)", k)
		}
	}
	req, has := obj["required"]
	if !has {
		return nil, nil
	}
	names, ok := stringList(req)
	if !ok {
		return nil, errors.New("required is not a list of names")
	}
	return names, nil
}

// ifThenElse reads `if: {properties: {D: {const|enum}}, required: [D]}` with required-only
// then/else.
func (r resolver) ifThenElse(sh *shape, ifv, thenv, elsev any) error {
	obj, err := r.follow(ifv)
	if err != nil || obj == nil {
		return errors.New("if must be an object schema")
	}
	for k := range obj {
		switch k {
		case "properties", "required", "title", "description", "$comment":
		default:
			return fmt.Errorf("if may only test one property (%s)", k)
		}
	}
	props, _ := obj["properties"].(map[string]any)
	if len(props) != 1 {
		return errors.New("if must test exactly one property")
	}
	for name, ps := range props {
		test, err := r.follow(ps)
		if err != nil || test == nil {
			return errors.New("if property test must be an object schema")
		}
		if len(test) != 1 {
			return errors.New("if property test must be a single const or enum")
		}
		if c, has := test["const"]; has {
			sh.ifValues = []any{c}
		} else if e, ok := test["enum"].([]any); ok && len(e) > 0 {
			sh.ifValues = e
		} else {
			return errors.New("if property test must be a single const or enum")
		}
		sh.ifProp = name
	}
	if req, has := obj["required"]; has {
		names, ok := stringList(req)
		if !ok || len(names) != 1 || names[0] != sh.ifProp {
			return errors.New("if may only require its own property")
		}
	}
	if thenv == nil && elsev == nil {
		return errors.New("if without then or else")
	}
	if thenv != nil {
		if sh.then, err = r.requiredForm(thenv); err != nil {
			return fmt.Errorf("then: %w", err)
		}
	}
	if elsev != nil {
		if sh.els, err = r.requiredForm(elsev); err != nil {
			return fmt.Errorf("else: %w", err)
		}
	}
	return nil
}

// policyMismatch says which entries of the policy's fields and drafted lists name no argument
// the definition declares, and which drafted field the tool's [Required] label claims, or "" when
// there is none. A constraint on an argument that does not exist would
// silently vanish (a confirmation, a source restriction), so such a tool is not run.
func policyMismatch(pt *policy.Tool, d *definition) string {
	if pt == nil {
		return ""
	}
	// Every preflight asks this; the message, and its sorting, only for a policy that needs it.
	declared := true
	for name := range pt.Fields {
		declared = declared && d.props[name] != nil
	}
	for _, name := range pt.Drafted {
		declared = declared && d.props[name] != nil && !d.requiredLabel[name]
	}
	if declared {
		return ""
	}
	var why []string
	for _, name := range pt.Drafted {
		switch {
		case d.props[name] == nil:
			why = append(why, fmt.Sprintf("drafted %s names no argument of the tool%s", name, suggest.DidYouMean(name, d.propOrder)))
		case d.requiredLabel[name]:
			// [Required] asks for a source other than the user's word; a draft is the model's.
			why = append(why, fmt.Sprintf("drafted %s is [Required] by the tool, which a draft can never satisfy", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pt.Fields)) {
		if d.props[name] == nil {
			why = append(why, fmt.Sprintf("fields.%s names no argument of the tool%s", name, suggest.DidYouMean(name, d.propOrder)))
		}
	}
	return strings.Join(why, "; ") + " (its arguments: " + strings.Join(d.propOrder, ", ") + ")"
}
