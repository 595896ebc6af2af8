package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/loopback"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/store"
)

// A Source yields records. Which kind is read depends on where the caller lists it (decision
// sources or execution sources), not on the source: a bbolt file or an HTTP daemon can serve
// either.
type Source interface {
	// String names the source in reports and errors; it never holds a credential.
	String() string
	// Decisions calls fn with each decision record until fn returns an error.
	Decisions(ctx context.Context, fn func(*store.Decision) error) error
	// Executions calls fn with each execution record until fn returns an error.
	Executions(ctx context.Context, fn func(*api.ExecutionRecord) error) error
}

// Completeness says how an audit knows it read a source to its end. A source's records can
// only be trusted as all of its records when the read could prove it saw the end.
type Completeness string

const (
	// Confirmed: a daemon's HTTP export whose trailers confirmed the end of the stream and the
	// number of records it carried (api.CheckExportTrailer).
	Confirmed Completeness = "confirmed"
	// StoreFile: a bbolt file, read whole through the store; there is no stream to cut.
	StoreFile Completeness = "store_file"
	// Unverified: a JSONL file, or a Source of a type this package does not know. A JSONL file
	// cut at a line boundary reads exactly like a whole, shorter export, so that the file is
	// whole is the operator's responsibility.
	Unverified Completeness = "unverified"
)

// completenessReader is implemented by this package's sources, which can tell how complete a
// read was.
type completenessReader interface {
	readDecisions(ctx context.Context, fn func(*store.Decision) error) (Completeness, error)
	readExecutions(ctx context.Context, fn func(*api.ExecutionRecord) error) (Completeness, error)
}

func readDecisions(ctx context.Context, src Source, fn func(*store.Decision) error) (Completeness, error) {
	if r, ok := src.(completenessReader); ok {
		return r.readDecisions(ctx, fn)
	}
	return Unverified, src.Decisions(ctx, fn)
}

func readExecutions(ctx context.Context, src Source, fn func(*api.ExecutionRecord) error) (Completeness, error) {
	if r, ok := src.(completenessReader); ok {
		return r.readExecutions(ctx, fn)
	}
	return Unverified, src.Executions(ctx, fn)
}

// SourceError reports a source that could not be read completely. The audit never reports on
// part of a source: a read that fails midway fails the audit.
type SourceError struct {
	Source  string // the source's String
	Records string // "decision" or "execution"
	Err     error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("audit: read %s records from %s: %v", e.Records, e.Source, e.Err)
}

func (e *SourceError) Unwrap() error { return e.Err }

// ErrUnknownFormat: a file is neither a bbolt file nor a JSONL export.
var ErrUnknownFormat = errors.New("not a bbolt file or a JSONL export")

// SourceOptions configure ParseSource.
type SourceOptions struct {
	// Token is the admin bearer token sent to an HTTP source.
	Token string
	// Client is the HTTP client of an HTTP source; nil means one built by NewHTTPClient with
	// no TLS options.
	Client *http.Client
	// AllowPlainHTTP permits an http:// source on a host that is not a loopback address.
	// Without it such a source is refused: the admin token and the records would cross the
	// network in clear.
	AllowPlainHTTP bool
	// LockTimeout bounds the wait for a bbolt file's lock; zero means one second.
	LockTimeout time.Duration
	// Unmasked asks an HTTP source for its records as stored, not masked: for a reader that
	// needs what masking hides (replay reads the captured requests). The audit never does.
	Unmasked bool
}

// ParseSource returns the source loc names: an http:// or https:// base URL is an HTTP
// source, anything else a file path.
func ParseSource(loc string, opts SourceOptions) (Source, error) {
	if loc == "" {
		return nil, errors.New("audit: empty source")
	}
	lower := strings.ToLower(loc)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return &File{Path: loc, LockTimeout: opts.LockTimeout}, nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("audit: source %q: %w", loc, err)
	}
	switch {
	case u.Host == "":
		return nil, fmt.Errorf("audit: source %q has no host", loc)
	case u.User != nil:
		// A credential in the URL would be printed with the source's name.
		return nil, fmt.Errorf("audit: source %q carries credentials in the URL; pass the token separately", redact(u))
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("audit: source %q: give the daemon's base URL, without a query", redact(u))
	case u.Scheme == "http" && !opts.AllowPlainHTTP && !loopback.Host(u.Hostname()):
		return nil, fmt.Errorf("audit: source %q is plain HTTP to a non-loopback host: the admin token would travel in clear (use https)", loc)
	}
	client := opts.Client
	if client == nil {
		if client, err = NewHTTPClient(TLSOptions{}); err != nil {
			return nil, err
		}
	}
	return &HTTP{BaseURL: u.String(), Token: opts.Token, Client: client, Unmasked: opts.Unmasked}, nil
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.Fragment = "", ""
	return c.String()
}

// earliest is the earliest time the store's time index can represent: reading from it reads
// everything.
var earliest = time.Unix(0, math.MinInt64)

// File is a record file on disk: a daemon's bbolt file or a JSONL export, told apart by their
// first bytes. A JSONL export may also be a pipe (such as a shell's process substitution): it
// is read once, from one open.
//
// Nothing in a JSONL file proves that it is whole: an export cut at a line boundary (a
// download or copy that stopped early, a pipe whose writer died) reads as a complete, shorter
// one. The report marks such a source Unverified; read a live daemon over HTTP, whose export
// confirms its end, when that matters.
type File struct {
	Path string
	// LockTimeout bounds the wait for a bbolt file's shared lock; zero means one second. A
	// running daemon holds its file's lock for as long as it runs.
	LockTimeout time.Duration
}

func (f *File) String() string { return f.Path }

// Decisions implements Source.
func (f *File) Decisions(ctx context.Context, fn func(*store.Decision) error) error {
	_, err := f.readDecisions(ctx, fn)
	return err
}

// Executions implements Source.
func (f *File) Executions(ctx context.Context, fn func(*api.ExecutionRecord) error) error {
	_, err := f.readExecutions(ctx, fn)
	return err
}

func (f *File) readDecisions(ctx context.Context, fn func(*store.Decision) error) (Completeness, error) {
	return f.read(ctx,
		func(db *store.DB) error { return db.Decisions().Since(ctx, earliest, fn) },
		func(r io.Reader) error { return store.ReadDecisions(r, fn) })
}

func (f *File) readExecutions(ctx context.Context, fn func(*api.ExecutionRecord) error) (Completeness, error) {
	return f.read(ctx,
		func(db *store.DB) error { return db.Executions().Since(ctx, earliest, fn) },
		func(r io.Reader) error { return store.ReadExecutions(r, fn) })
}

// boltMagic is bbolt's meta page magic, at offset 16 of the file (after the page header).
const boltMagic = 0xED0CDAED

func (f *File) read(ctx context.Context, fromDB func(*store.DB) error, fromJSONL func(io.Reader) error) (Completeness, error) {
	fh, err := opfile.Open(f.Path)
	if err != nil {
		return Unverified, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.IsDir() {
		return Unverified, fmt.Errorf("%s is a directory; name the daemon's bbolt file or an export", f.Path)
	}
	br := bufio.NewReaderSize(fh, 64<<10)
	head, err := br.Peek(4096)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return Unverified, err
	}
	switch {
	case len(bytes.TrimLeft(head, " \t\r\n")) == 0 || bytes.TrimLeft(head, " \t\r\n")[0] == '{':
		// An empty export is an export of no records.
		return Unverified, fromJSONL(ctxReader{ctx, br})
	case len(head) >= 20 && binary.LittleEndian.Uint32(head[16:20]) == boltMagic:
		fh.Close() // bbolt opens the file itself, with its own lock
		db, err := store.Open(f.Path, store.Options{ReadOnly: true, LockTimeout: f.LockTimeout})
		if err != nil {
			return StoreFile, err
		}
		defer db.Close(context.WithoutCancel(ctx))
		return StoreFile, fromDB(db)
	default:
		return Unverified, fmt.Errorf("%s: %w", f.Path, ErrUnknownFormat)
	}
}

// ctxReader ends a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// HTTP is a daemon's records endpoint: verdictd's GET /v1/records and the executor's
// GET /v1/executions, both JSONL streams behind the admin token.
//
// A read succeeds only when the response ends with the daemon's completion trailers
// (api.ExportCompleteTrailer, and api.ExportRecordsTrailer equal to the number of records
// read): a stream cut at a line boundary, by the daemon failing midway, a proxy's timeout or a
// reset after a complete line, would otherwise read as a whole, shorter export. A proxy
// between the audit and the daemon must therefore pass HTTP trailers through (HTTP/1.1
// chunked or HTTP/2); one that drops them fails every read, never a report on part of the
// records.
type HTTP struct {
	BaseURL string // scheme://host[:port][/prefix]
	Token   string
	Client  *http.Client
	// Unmasked reads the records as stored (SourceOptions.Unmasked).
	Unmasked bool
}

func (h *HTTP) String() string { return h.BaseURL }

// Both endpoints are asked for masked records (mask=1) unless Unmasked: the audit reads ids,
// outcomes, bindings and digests, never argument values or verdict tokens, and what stays on
// the daemon cannot leak from the audit.

func (h *HTTP) query() url.Values {
	if h.Unmasked {
		return url.Values{}
	}
	return url.Values{"mask": {"1"}}
}

// Decisions implements Source.
func (h *HTTP) Decisions(ctx context.Context, fn func(*store.Decision) error) error {
	_, err := h.readDecisions(ctx, fn)
	return err
}

// Executions implements Source.
func (h *HTTP) Executions(ctx context.Context, fn func(*api.ExecutionRecord) error) error {
	_, err := h.readExecutions(ctx, fn)
	return err
}

func (h *HTTP) readDecisions(ctx context.Context, fn func(*store.Decision) error) (Completeness, error) {
	return get(ctx, h, "/v1/records", store.ReadDecisions, fn)
}

func (h *HTTP) readExecutions(ctx context.Context, fn func(*api.ExecutionRecord) error) (Completeness, error) {
	return get(ctx, h, "/v1/executions", store.ReadExecutions, fn)
}

// get reads one export of h with read, calling fn with each record; the daemon's trailer must
// then confirm the number of records read.
func get[T any](ctx context.Context, h *HTTP, path string, read func(io.Reader, func(T) error) error, fn func(T) error) (Completeness, error) {
	u, err := url.Parse(h.BaseURL)
	if err != nil {
		return Unverified, err
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(u.Path, path) {
		u.Path += path
	}
	u.RawPath = ""
	q := h.query()
	// Every record: an explicit lower bound, so that no server default can narrow the read.
	q.Set("since", time.Unix(0, 0).UTC().Format(time.RFC3339))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Unverified, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	// The completion trailers are what the read is checked against: tell intermediaries the
	// client wants them (RFC 9110 §10.1.4).
	req.Header.Set("TE", "trailers")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	resp, err := cmp.Or(h.Client, http.DefaultClient).Do(req)
	if err != nil {
		return Unverified, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Unverified, statusError(resp)
	}
	records := 0
	if err := read(resp.Body, func(x T) error { records++; return fn(x) }); err != nil {
		return Unverified, err
	}
	// read returns nil only once the body returned io.EOF, which is when net/http has filled
	// resp.Trailer; drain anyway, so that the check never sees the trailer of a body read
	// short.
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n > 0 {
		return Unverified, fmt.Errorf("%w: the stream did not end after its last record", api.ErrExportIncomplete)
	}
	if err := api.CheckExportTrailer(resp.Trailer, records); err != nil {
		return Unverified, err
	}
	return Confirmed, nil
}

// statusError describes a refused request from the contract's error envelope, when it has one.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	detail := ""
	if e := httpx.ReadError(resp.StatusCode, body); e.Code != "" {
		detail = ": " + e.Code
		if e.Message != "" {
			detail += " (" + e.Message + ")"
		}
	}
	hint := ""
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = "; the records endpoints need the daemon's admin token"
	case http.StatusNotFound:
		hint = "; is this the daemon's base URL?"
	}
	return fmt.Errorf("%s %s: HTTP %s%s%s", resp.Request.Method, redact(resp.Request.URL), resp.Status, detail, hint)
}

// TLSOptions configure the HTTP client of HTTP sources.
type TLSOptions struct {
	CAFile   string // PEM bundle trusted instead of the system roots
	CertFile string // client certificate, for daemons that require mTLS
	KeyFile  string
}

// NewHTTPClient returns a client for HTTP sources. It follows no redirect: a records endpoint
// has no reason to send one, and following it would hand the admin token to another URL.
func NewHTTPClient(o TLSOptions) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := opfile.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("audit: CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("audit: CA bundle %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("audit: a client certificate needs both its certificate and its key file")
	}
	if o.CertFile != "" {
		cert, err := opfile.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("audit: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("refusing to follow a redirect to %s", redact(req.URL))
		},
	}, nil
}
