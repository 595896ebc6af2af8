package measure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
)

func (m *Measurer) measureHTTP(ctx context.Context, h *policy.HTTPMeasurement, inputs map[string]any) (any, error) {
	raw, err := fillURL(h.URL, inputs)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &Error{Kind: ErrDeclaration, Err: errors.New("the filled URL is not an absolute http(s) URL")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &Error{Kind: ErrDeclaration, Err: errors.New("cannot build the request")}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		// The URL holds argument values: report the cause without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &Error{Kind: ErrUnavailable, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, &Error{Kind: ErrStatus, Err: fmt.Errorf("GET answered %d", resp.StatusCode)}
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return nil, &Error{Kind: ErrContentType, Err: fmt.Errorf("got %q, want application/json", resp.Header.Get("Content-Type"))}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, m.maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &Error{Kind: ErrUnavailable, Err: fmt.Errorf("read reply: %w", err)}
	}
	if int64(len(body)) > m.maxBody {
		return nil, &Error{Kind: ErrResponse, Err: fmt.Errorf("reply exceeds %d bytes", m.maxBody)}
	}
	doc, err := canonical.Decode(body)
	if err != nil {
		return nil, &Error{Kind: ErrResponse, Err: err}
	}
	return Pointer(doc, h.Pointer)
}

// isJSON accepts application/json and any application/*+json media type.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// fillURL substitutes every {{name}} with the escaped text of a known scalar. Escaping covers
// '/', '?', '&' and '#', so a value can never change the URL's host, path shape or query keys.
func fillURL(tmpl string, inputs map[string]any) (string, error) {
	return fill(tmpl, inputs, func(text string) string { return strings.ReplaceAll(url.QueryEscape(text), "+", "%20") })
}

// fill substitutes every {{name}} in tmpl with escape of the text of a known scalar; the error
// is the first input that cannot be written.
func fill(tmpl string, inputs map[string]any, escape func(string) string) (string, error) {
	var ferr error
	out := placeholder.ReplaceAllStringFunc(tmpl, func(p string) string {
		text, err := inputText(placeholder.FindStringSubmatch(p)[1], inputs)
		if err != nil {
			ferr = cmp.Or(ferr, err)
			return ""
		}
		return escape(text)
	})
	return out, ferr
}
