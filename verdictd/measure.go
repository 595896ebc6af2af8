package verdictd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// DefaultMeasureTimeout bounds a measurement whose policy entry sets no timeout.
const DefaultMeasureTimeout = 5 * time.Second

// maxMeasureBytes bounds a measurement response.
const maxMeasureBytes = 1 << 20

var placeholder = regexp.MustCompile(`\{\{\s*([^{}\s]+)\s*\}\}`)

// measurer performs the policy's measurements: an HTTP GET or a call of a read-only MCP tool
// on a policy server, each with a timeout, the value taken at a JSON pointer. Every failure is
// an error (a failed lookup, routed to definition repair), never an empty value.
type measurer struct {
	client  *http.Client
	catalog func() *upstream.Catalog // the catalog of the policy in force
	metrics *metrics
}

var _ gates.Measurer = (*measurer)(nil)

func (m *measurer) Measure(ctx context.Context, ms *policy.Measurement, inputs map[string]any) (any, error) {
	timeout := ms.Timeout
	if timeout <= 0 {
		timeout = DefaultMeasureTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var (
		v      any
		err    error
		source string
	)
	switch {
	case ms.HTTP != nil:
		source = "http"
		v, err = m.measureHTTP(ctx, ms.HTTP, inputs)
	case ms.MCP != nil:
		source = "mcp"
		v, err = m.measureMCP(ctx, ms.MCP, inputs)
	default:
		source, err = "none", errors.New("measurement declares neither http nor mcp")
	}
	if m.metrics != nil {
		m.metrics.measureDur.WithLabelValues(source).Observe(time.Since(start).Seconds())
		if err != nil {
			m.metrics.measureFail.Inc()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("measurement %s: %w", ms.Name, err)
	}
	return v, nil
}

func (m *measurer) measureHTTP(ctx context.Context, h *policy.HTTPMeasurement, inputs map[string]any) (any, error) {
	var ferr error
	u := placeholder.ReplaceAllStringFunc(h.URL, func(s string) string {
		name := placeholder.FindStringSubmatch(s)[1]
		v, ok := inputs[name]
		if !ok {
			ferr = fmt.Errorf("input %s is not known", name)
			return ""
		}
		text, err := scalarText(v)
		if err != nil {
			ferr = fmt.Errorf("input %s: %w", name, err)
			return ""
		}
		return strings.ReplaceAll(url.QueryEscape(text), "+", "%20")
	})
	if ferr != nil {
		return nil, ferr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		// The URL can carry argument values: report the failure without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMeasureBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(body) > maxMeasureBytes {
		return nil, errors.New("response exceeds 1 MiB")
	}
	return pointerValue(body, h.Pointer)
}

func (m *measurer) measureMCP(ctx context.Context, mc *policy.MCPMeasurement, inputs map[string]any) (any, error) {
	args := make(map[string]any, len(mc.Args))
	for k, v := range mc.Args {
		filled, err := fillTemplate(v, inputs)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", k, err)
		}
		args[k] = filled
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	cat := m.catalog()
	if cat == nil {
		return nil, errors.New("no catalog")
	}
	client, err := cat.Client(ctx, mc.Server)
	if err != nil {
		return nil, err
	}
	res, err := client.Call(ctx, mc.Tool, raw)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, errors.New("tool reported an error")
	}
	var doc []byte
	if res.StructuredContent != nil {
		if doc, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, err
		}
	} else {
		return nil, errors.New("tool returned no structured content")
	}
	return pointerValue(doc, mc.Pointer)
}

// fillTemplate substitutes {{name}} placeholders in string values. A string that is exactly one
// placeholder takes the input's value with its type; one embedded in text takes its text.
func fillTemplate(v any, inputs map[string]any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil
	}
	if m := placeholder.FindStringSubmatch(s); m != nil && m[0] == s {
		in, ok := inputs[m[1]]
		if !ok {
			return nil, fmt.Errorf("input %s is not known", m[1])
		}
		return in, nil
	}
	var ferr error
	out := placeholder.ReplaceAllStringFunc(s, func(p string) string {
		name := placeholder.FindStringSubmatch(p)[1]
		in, ok := inputs[name]
		if !ok {
			ferr = fmt.Errorf("input %s is not known", name)
			return ""
		}
		t, err := scalarText(in)
		if err != nil {
			ferr = err
		}
		return t
	})
	return out, ferr
}

func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("a %T cannot be put in a template", v)
}

// pointerValue decodes doc and returns the value at the RFC 6901 pointer ("" is the whole
// document). A pointer that leads nowhere is an error.
func pointerValue(doc []byte, pointer string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("response is not JSON: %w", err)
	}
	if pointer == "" {
		return v, nil
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", pointer)
	}
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("pointer %q: no member %q", pointer, tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return nil, fmt.Errorf("pointer %q: no element %q", pointer, tok)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("pointer %q leads into a scalar", pointer)
		}
	}
	return v, nil
}
