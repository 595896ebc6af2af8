package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/verdictgate/verdict/api"
)

// Query selects the records of an export. The zero Query selects every record.
type Query struct {
	// Since selects records from this time on (zero: from the first).
	Since time.Time
	// VerdictID selects the records of one verdict.
	VerdictID string
	// ActionKey selects the records of one action key (verdictd's records only).
	ActionKey string
	// Mask asks the daemon to mask values (the verdict token, argument values) in what it
	// sends; a masked record keeps its shape but not every member's type.
	Mask bool
}

func (q Query) values() url.Values {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.VerdictID != "" {
		v.Set("verdict_id", q.VerdictID)
	}
	if q.ActionKey != "" {
		v.Set("action_key", q.ActionKey)
	}
	if q.Mask {
		v.Set("mask", "1")
	}
	return v
}

// Record reads one decision record from verdictd (GET /v1/records/{id}) as it is stored. A
// record that does not exist is an *Error with Code "not_found".
func (c *Client) Record(ctx context.Context, id string, mask bool) (json.RawMessage, error) {
	return c.getOne(ctx, "/v1/records/"+url.PathEscape(id), mask)
}

// Execution reads one execution record from the executor (GET /v1/executions/{id}). The
// executor masks nothing in a single record: an export with Query.Mask does.
func (c *Client) Execution(ctx context.Context, id string) (json.RawMessage, error) {
	return c.getOne(ctx, "/v1/executions/"+url.PathEscape(id), false)
}

func (c *Client) getOne(ctx context.Context, path string, mask bool) (json.RawMessage, error) {
	req, err := c.request(ctx, http.MethodGet, path, Query{Mask: mask}.values(), c.admin, nil, "")
	if err != nil {
		return nil, err
	}
	status, body, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, refusal(status, body)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("client: GET %s: the answer is not JSON", path)
	}
	return body, nil
}

// Records exports verdictd's decision records (GET /v1/records), handing each line, one
// record, to fn in the order they arrive; an error from fn stops the export and is returned.
// It returns the number of records read. The export is whole only when the daemon's
// completion trailers confirm it: otherwise the error wraps api.ErrExportIncomplete, and the
// records already handed over are a part of the export, not all of it.
func (c *Client) Records(ctx context.Context, q Query, fn func(json.RawMessage) error) (int, error) {
	return c.export(ctx, "/v1/records", q, fn)
}

// Executions exports the executor's execution records (GET /v1/executions), as Records does.
// Query.ActionKey selects nothing there and is refused before any request is sent.
func (c *Client) Executions(ctx context.Context, q Query, fn func(json.RawMessage) error) (int, error) {
	if q.ActionKey != "" {
		return 0, errors.New("client: executions: the executor selects by verdict_id or since, not action_key")
	}
	return c.export(ctx, "/v1/executions", q, fn)
}

func (c *Client) export(ctx context.Context, path string, q Query, fn func(json.RawMessage) error) (int, error) {
	req, err := c.request(ctx, http.MethodGet, path, q.values(), c.admin, nil, "")
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	// The completion trailers are what the read is checked against: tell intermediaries the
	// client wants them (RFC 9110 §10.1.4).
	req.Header.Set("TE", "trailers")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("client: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
		return 0, refusal(resp.StatusCode, body)
	}
	n, err := readExport(resp.Body, func() http.Header { return resp.Trailer }, fn)
	if err != nil {
		return n, fmt.Errorf("client: GET %s: %w", path, err)
	}
	return n, nil
}

// readExport hands each non-blank line of body to fn and, once body has ended, checks the
// completion trailers (trailer is called only then: net/http fills them at io.EOF) against the
// number of lines. It returns the number of lines handed over; an error from fn stops it.
func readExport(body io.Reader, trailer func() http.Header, fn func(json.RawMessage) error) (int, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return n, fmt.Errorf("line %d is not JSON", n+1)
		}
		n++
		if err := fn(bytes.Clone(line)); err != nil {
			return n, err
		}
	}
	if err := sc.Err(); err != nil {
		// A cut connection: the daemon aborts a failing export rather than end it short.
		return n, fmt.Errorf("%w after %d records: %w", api.ErrExportIncomplete, n, err)
	}
	return n, api.CheckExportTrailer(trailer(), n)
}
