// Package apitest holds tests to api/openapi.yaml: it loads the description, lists a daemon's
// operations, and checks that a refusal a handler wrote is the error envelope the description
// gives that status, validated with the description's own schema.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// base is the URL the description and its schemas are loaded under, so that its relative
// references ("../schemas/…") resolve as they do in the repository.
const base = "https://verdict.invalid/"

// Spec is api/openapi.yaml, loaded.
type Spec struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
}

// An Operation is one described method on one path.
type Operation struct {
	Method, Path string // "GET", "/v1/records/{id}"
	// Token is true when every security requirement needs a bearer token (no empty one).
	Token bool
	// Statuses are the described response statuses.
	Statuses []int
}

// Load reads api/openapi.yaml and the schemas it refers to from the module's root.
func Load(t testing.TB) *Spec {
	t.Helper()
	root := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("api/openapi.yaml is not JSON-compatible: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{doc: doc.(map[string]any), compiler: jsonschema.NewCompiler()}
	if v := s.doc["openapi"]; v != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", v)
	}
	s.compiler.AssertFormat()
	if err := s.compiler.AddResource(base+"api/openapi.yaml", doc); err != nil {
		t.Fatal(err)
	}
	schemas, err := filepath.Glob(filepath.Join(root, "schemas", "*.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range schemas {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		d, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := s.compiler.AddResource(base+"schemas/"+filepath.Base(p), d); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// moduleRoot is the directory of go.mod above this file.
func moduleRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("apitest: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Operations are the operations tagged tag ("verdictd", "executor"), sorted by path and method.
func (s *Spec) Operations(tag string) []Operation {
	var ops []Operation
	paths, _ := s.doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, v := range item.(map[string]any) {
			op, ok := v.(map[string]any)
			if !ok {
				continue
			}
			tags, _ := op["tags"].([]any)
			if !slices.Contains(tags, any(tag)) {
				continue
			}
			o := Operation{Method: strings.ToUpper(method), Path: path}
			reqs, _ := op["security"].([]any)
			o.Token = len(reqs) > 0 && !slices.ContainsFunc(reqs, func(r any) bool {
				m, _ := r.(map[string]any)
				return len(m) == 0
			})
			responses, _ := op["responses"].(map[string]any)
			for code := range responses {
				if n, err := strconv.Atoi(code); err == nil {
					o.Statuses = append(o.Statuses, n)
				}
			}
			slices.Sort(o.Statuses)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	return ops
}

// Paths are the described paths, sorted.
func (s *Spec) Paths() []string {
	paths, _ := s.doc["paths"].(map[string]any)
	return slices.Sorted(maps.Keys(paths))
}

// Methods are the methods described at path.
func (s *Spec) Methods(path string) []string {
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	var ms []string
	for m := range item {
		switch m {
		case "get", "put", "post", "delete", "options", "head", "patch", "trace":
			ms = append(ms, strings.ToUpper(m))
		}
	}
	slices.Sort(ms)
	return ms
}

// Described reports whether method on path (a template such as /v1/records/{id}) is described.
func (s *Spec) Described(method, path string) bool {
	_, ok := s.operation(method, path)
	return ok
}

// operation returns the described operation of method on path.
func (s *Spec) operation(method, path string) (map[string]any, bool) {
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	return op, ok
}

// response resolves a described response of method on path at status: the response object,
// and its JSON pointer in the description.
func (s *Spec) response(method, path string, status int) (map[string]any, string, error) {
	o, _ := s.operation(method, path)
	responses, _ := o["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s %s: status %d is not described", method, path, status)
	}
	ptr := "/paths/" + escape(path) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(status)
	if ref, ok := resp["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/components/responses/")
		if !ok {
			return nil, "", fmt.Errorf("%s %s %d: unexpected $ref %q", method, path, status, ref)
		}
		resp, _ = s.doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
		ptr = "/components/responses/" + escape(name)
	}
	return resp, ptr, nil
}

// ResponseSchema compiles the schema the description gives an answer of method on path with
// status and media type.
func (s *Spec) ResponseSchema(method, path string, status int, mediaType string) (*jsonschema.Schema, error) {
	if !s.Described(method, path) {
		return nil, fmt.Errorf("%s %s is not described", method, path)
	}
	resp, ptr, err := s.response(method, path, status)
	if err != nil {
		return nil, err
	}
	content, _ := resp["content"].(map[string]any)
	if _, ok := content[mediaType].(map[string]any); !ok {
		return nil, fmt.Errorf("%s %s %d: media type %q is not described (%v)", method, path, status, mediaType, slices.Sorted(maps.Keys(content)))
	}
	return s.compiler.Compile(base + "api/openapi.yaml#" + ptr + "/content/" + escape(mediaType) + "/schema")
}

// RequestSchema compiles the schema the description gives a request body of method on path
// with media type.
func (s *Spec) RequestSchema(method, path, mediaType string) (*jsonschema.Schema, error) {
	ptr := "/paths/" + escape(path) + "/" + strings.ToLower(method) + "/requestBody/content/" + escape(mediaType) + "/schema"
	return s.compiler.Compile(base + "api/openapi.yaml#" + ptr)
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// ErrorSchema is the description's error envelope, components/schemas/ErrorBody.
func (s *Spec) ErrorSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	sch, err := s.compiler.Compile(base + "api/openapi.yaml#/components/schemas/ErrorBody")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// CheckRefusal checks an answer of op that must be a refusal with status and code: the status
// is described for op, the body is JSON matching the schema described for it, that schema is
// the error envelope's, the code is code, and every header the description gives the response
// (WWW-Authenticate on a 401) is present.
func (s *Spec) CheckRefusal(t testing.TB, op Operation, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s %s: status %d (%.200s), want %d", op.Method, op.Path, resp.StatusCode, body, status)
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" {
		t.Errorf("%s %s %d: Content-Type %q, want application/json", op.Method, op.Path, status, resp.Header.Get("Content-Type"))
		return
	}
	sch, err := s.ResponseSchema(op.Method, op.Path, status, mt)
	if err != nil {
		t.Error(err)
		return
	}
	s.checkEnvelope(t, fmt.Sprintf("%s %s %d", op.Method, op.Path, status), sch, body, code)
	s.checkEnvelope(t, fmt.Sprintf("%s %s %d", op.Method, op.Path, status), s.ErrorSchema(t), body, code)
	described, _, _ := s.response(op.Method, op.Path, status)
	headers, _ := described["headers"].(map[string]any)
	for h := range headers {
		if resp.Header.Get(h) == "" {
			t.Errorf("%s %s %d: no %s header, which the description gives", op.Method, op.Path, status, h)
		}
	}
}

// CheckEnvelope checks a refusal that no operation describes (an unknown path or method, or
// a daemon the description does not cover): status, application/json, a body matching the
// error envelope's schema, and code.
func (s *Spec) CheckEnvelope(t testing.TB, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d (%.200s), want %d", what, resp.StatusCode, body, status)
		return
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", what, resp.Header.Get("Content-Type"))
		return
	}
	s.checkEnvelope(t, what, s.ErrorSchema(t), body, code)
}

func (s *Spec) checkEnvelope(t testing.TB, what string, sch *jsonschema.Schema, body []byte, code string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: the body is not JSON: %v\n%.300s", what, err, body)
		return
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s: the body does not match the described schema: %v\n%.300s", what, err, body)
		return
	}
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error.Code != code {
		t.Errorf("%s: error code %q (%v), want %q", what, env.Error.Code, err, code)
	}
}

// probeMethods are the methods sent to a described path that does not serve them.
var probeMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// pathParam is a path template's parameter ("{id}").
var pathParam = regexp.MustCompile(`\{[^}/]+\}`)

// CheckRefusals sends the daemon at baseURL what every operation tagged tag must refuse before
// a handler reads it, and checks each answer against the description: a request without a
// token and one with a token nobody holds are 401 unauthorized, as described for the
// operation (with a WWW-Authenticate challenge, error="invalid_token" for the token nobody
// holds, where the description gives the header); a method the path is not described for,
// and paths that are not described at all, are 404 not_found (the description's "any other
// path or method"). Every body must be the error envelope.
func (s *Spec) CheckRefusals(t *testing.T, tag, baseURL string) {
	t.Helper()
	ops := s.Operations(tag)
	if len(ops) == 0 {
		t.Fatalf("api/openapi.yaml describes no operation tagged %q", tag)
	}
	for _, op := range ops {
		target := pathParam.ReplaceAllString(op.Path, "x")
		if op.Token {
			for _, token := range []string{"", "a-token-nobody-holds"} {
				resp, body := send(t, op.Method, baseURL+target, token)
				s.CheckRefusal(t, op, resp, body, http.StatusUnauthorized, "unauthorized")
				described, _, _ := s.response(op.Method, op.Path, http.StatusUnauthorized)
				headers, _ := described["headers"].(map[string]any)
				if _, ok := headers["WWW-Authenticate"]; !ok {
					continue
				}
				ch := resp.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, "Bearer ") || (token != "") != strings.Contains(ch, `error="invalid_token"`) {
					t.Errorf("%s %s with token %q: WWW-Authenticate %q", op.Method, target, token, ch)
				}
			}
		}
		described := s.Methods(op.Path)
		for _, m := range probeMethods {
			if slices.Contains(described, m) {
				continue
			}
			resp, body := send(t, m, baseURL+target, "")
			s.CheckEnvelope(t, m+" "+target, resp, body, http.StatusNotFound, "not_found")
		}
	}
	for _, p := range []string{"/", "/v1", "/v1/", "/v2/preflight", "/v1/nothing", "/healthz/x"} {
		for _, m := range []string{"GET", "POST"} {
			resp, body := send(t, m, baseURL+p, "")
			s.CheckEnvelope(t, m+" "+p, resp, body, http.StatusNotFound, "not_found")
		}
	}
}

func send(t *testing.T, method, url, token string) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if method == "POST" || method == "PUT" || method == "PATCH" {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
