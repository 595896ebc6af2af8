package plainhttp

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Pool holds the kept-alive connections of requests to one server. The zero
// Pool is ready to use.
type Pool struct {
	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

// As http.DefaultTransport keeps them.
const (
	maxIdle     = http.DefaultMaxIdleConnsPerHost
	idleTimeout = 90 * time.Second
	dialTimeout = 30 * time.Second
	keepAlive   = 30 * time.Second
	max1xx      = 5
)

type conn struct {
	nc      net.Conn
	lr      *limitedReader // under br: bounds a response's header
	br      *bufio.Reader
	bw      *bufio.Writer // writes to nc through written
	written *countingWriter
	since   time.Time // idle since
	reused  int       // calls sent on it before the current one
}

// maxHeaderBytes bounds a response's status line and header, as net/http's Transport bounds
// them by default.
const maxHeaderBytes = 10 << 20

// unlimited is a limitedReader's bound while a response's body is read.
const unlimited = math.MaxInt64

// errHeaderTooLarge: a response's header went past maxHeaderBytes.
var errHeaderTooLarge = errors.New("response header too large")

// limitedReader reads from r at most left bytes more, then fails with errHeaderTooLarge.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// countingWriter counts the bytes written to the connection, so that a
// call whose write failed is sent again only if none of it went out, as
// the Transport decides (its nothingWrittenError).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ErrNotSent marks a request that failed before it reached a connection:
// none of it was written, on this attempt or an earlier one.
var ErrNotSent = errors.New("the request was not sent: no connection to the server")

// get returns a kept-alive connection that is still open, or (and, when
// fresh, always) dials one.
func (h *Pool) get(ctx context.Context, addr string, fresh bool) (*conn, error) {
	now := time.Now()
	for !fresh {
		h.mu.Lock()
		var pc *conn
		if n := len(h.idle); n > 0 {
			pc, h.idle = h.idle[n-1], h.idle[:n-1]
		}
		h.mu.Unlock()
		if pc == nil {
			break
		}
		if now.Sub(pc.since) < idleTimeout && ConnOpen(pc.nc) {
			pc.reused++
			return pc, nil
		}
		pc.nc.Close()
	}
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: nc}
	lr := &limitedReader{r: nc, left: unlimited}
	return &conn{nc: nc, lr: lr, br: bufio.NewReader(lr), bw: bufio.NewWriter(cw), written: cw}, nil
}

// put keeps pc for the next call, or closes it.
func (h *Pool) put(pc *conn) {
	pc.since = time.Now()
	h.mu.Lock()
	if !h.closed && len(h.idle) < maxIdle {
		h.idle = append(h.idle, pc)
		pc = nil
	}
	h.mu.Unlock()
	if pc != nil {
		pc.nc.Close()
	}
}

// Close closes the kept connections, and every one returned from now on.
func (h *Pool) Close() {
	h.mu.Lock()
	idle := h.idle
	h.idle, h.closed = nil, true
	h.mu.Unlock()
	for _, pc := range idle {
		pc.nc.Close()
	}
}

// Kept returns the connections kept for the next request, the most recently
// used last: to tell what a Pool holds, never to write on.
func (h *Pool) Kept() []net.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := make([]net.Conn, len(h.idle))
	for i, pc := range h.idle {
		kept[i] = pc.nc
	}
	return kept
}

// Addr reports the address to dial for a request to u sent by a Pool, or ""
// when it must go through net/http's Transport: a scheme other than http,
// credentials in the URL, or a proxy for it (or a system where a kept
// connection the server closed cannot be told).
func Addr(u *url.URL) string {
	if !canCheckConns || u.Scheme != "http" || u.User != nil || u.Host == "" || u.Opaque != "" || !asciiHost(u.Host) {
		return ""
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); p != nil || err != nil {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80"))
}

// errInvalid: a request net/http's Transport would refuse to write.
var errInvalid = errors.New("plainhttp: a request net/http would not write")

// check refuses, as net/http's Transport refuses them, a request whose method is not a token,
// whose host or request target holds what a request line or Host header cannot carry, or one
// of whose header names or values is not valid (User-Agent included): a Pool writes what it is
// given, so nothing it is given may split a request.
func (r Request) check() error {
	switch {
	case r.Method == "" || !httpguts.ValidHeaderFieldName(r.Method):
		return fmt.Errorf("%w: method %q", errInvalid, r.Method)
	case !httpguts.ValidHostHeader(r.URL.Host) || !asciiHost(r.URL.Host):
		return fmt.Errorf("%w: host %q", errInvalid, r.URL.Host)
	case strings.ContainsFunc(r.URL.RequestURI(), func(c rune) bool { return c <= ' ' || c == 0x7f }):
		return fmt.Errorf("%w: a control character or space in the request target", errInvalid)
	}
	for name, values := range r.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Errorf("%w: header name %q", errInvalid, name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("%w: the value of header %s", errInvalid, name)
			}
		}
	}
	return nil
}

// asciiHost reports whether host is plain ASCII without a zone: a host net/http would write
// otherwise (punycoded, its zone dropped) is left to it.
func asciiHost(host string) bool {
	return !strings.ContainsFunc(host, func(c rune) bool { return c >= 0x80 || c == '%' })
}

// Request is what a Pool sends: method to URL (whose address, from Addr, is
// Addr) with Header and Body, whose length is known.
type Request struct {
	Method string
	URL    *url.URL
	Addr   string
	Header http.Header
	Body   []byte
}

// Do sends r and returns the response, whose body reads from the connection;
// closing it keeps the connection when the response was read to its end. A
// request that reached no connection fails with an error that wraps
// ErrNotSent. A redirect is returned as any other response. A ClientTrace in
// ctx hears of each connection asked for (GetConn) and each one the request
// is written on (GotConn), as from the Transport.
func (h *Pool) Do(ctx context.Context, r Request) (*http.Response, error) {
	if err := r.check(); err != nil && ctx.Err() == nil {
		// Refused before anything was written, as net/http refuses it.
		return nil, fmt.Errorf("%w: %w", ErrNotSent, r.urlError(ctx, err))
	}
	return h.send(ctx, r)
}

// urlError is err as http.Client returns an error of r's: a *url.Error, whose error is the
// context's cause once ctx has ended.
func (r Request) urlError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	return &url.Error{Op: urlErrorOp(r.Method), URL: r.URL.String(), Err: err}
}

// send is Do for a request already checked (Transport checks before it reads the body).
func (h *Pool) send(ctx context.Context, r Request) (*http.Response, error) {
	fail := func(err error) error { return r.urlError(ctx, err) }
	if err := ctx.Err(); err != nil {
		// As the Transport, which fails such a request before it asks for
		// a connection: not marked as unsent.
		return nil, fail(err)
	}
	// The Transport asks for gzip unless the request says what it accepts.
	gzipped := r.Header.Get("Accept-Encoding") == "" && r.Header.Get("Range") == "" && r.Method != http.MethodHead
	var (
		pc    *conn
		stop  func() bool
		abort func(error) (*http.Response, error)
	)
	trace := httptrace.ContextClientTrace(ctx)
	for fresh := false; ; fresh = true {
		if trace != nil && trace.GetConn != nil {
			trace.GetConn(r.Addr)
		}
		var err error
		if pc, err = h.get(ctx, r.Addr, fresh); err != nil {
			// No connection: nothing of the request was written, on this
			// attempt or (a write failed, see below) the one before.
			return nil, fmt.Errorf("%w: %w", ErrNotSent, fail(err))
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: pc.nc, Reused: pc.reused > 0})
		}
		nc := pc.nc
		stop = context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
		abort = func(err error) (*http.Response, error) {
			stop()
			pc.nc.Close()
			return nil, fail(err)
		}
		before := pc.written.n
		err = writeRequest(pc.bw, r, gzipped)
		if err == nil {
			break
		}
		if fresh || pc.reused == 0 || pc.written.n != before || ctx.Err() != nil {
			return abort(err)
		}
		// A kept connection the server closed before any of the request
		// went out: as the Transport does, the request is sent again on a
		// new one.
		stop()
		pc.nc.Close()
	}
	var (
		resp *http.Response
		err  error
	)
	for n := 0; ; n++ {
		// As the Transport bounds each response's header (MaxResponseHeaderBytes' default):
		// a server sending header lines without end is cut off, not buffered.
		pc.lr.left = maxHeaderBytes
		resp, err = http.ReadResponse(pc.br, &http.Request{Method: r.Method})
		pc.lr.left = unlimited
		if err != nil {
			if errors.Is(err, errHeaderTooLarge) {
				err = fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", maxHeaderBytes)
			}
			return abort(err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// No request of a Pool asks to switch protocols: the connection is not HTTP/1.1
			// any more, and is never used again.
			return abort(errors.New("plainhttp: the server switched protocols, which no request asked for"))
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 {
			break
		}
		if n == max1xx {
			return abort(errors.New("net/http: too many 1xx informational responses"))
		}
	}
	resp.Request = nil
	pb := &body{body: resp.Body, h: h, pc: pc, ctx: ctx, stop: stop, keep: !resp.Close}
	resp.Body = pb
	if gzipped && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		// As the Transport undoes the compression it asked for.
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
		resp.Body = &gunzipBody{body: pb}
	}
	return resp, nil
}

// urlErrorOp is the Op of the *url.Error http.Client returns for a request
// of method: "Get", "Post", … as net/http spells them.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// writeRequest writes the request as the Transport writes one with a body of
// known length: request line, Host, User-Agent, Content-Length (when there
// is a body or the method expects one), the other headers in order of their
// names, then Accept-Encoding when the Transport would add it.
func writeRequest(w *bufio.Writer, r Request, gzipped bool) error {
	w.WriteString(r.Method)
	w.WriteString(" ")
	w.WriteString(r.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(r.URL.Host)
	w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if v, ok := r.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(ua)
		w.WriteString("\r\n")
	}
	if len(r.Body) > 0 || sendsLength(r.Method) {
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(r.Body)), 10))
		w.WriteString("\r\n")
	}
	if err := r.Header.WriteSubset(w, ownHeaders); err != nil {
		return err
	}
	if gzipped {
		w.WriteString("Accept-Encoding: gzip\r\n")
	}
	w.WriteString("\r\n")
	w.Write(r.Body)
	return w.Flush()
}

// sendsLength reports whether the Transport writes "Content-Length: 0" for
// an empty body of method.
func sendsLength(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// ownHeaders are the headers writeRequest writes itself (or, as the
// Transport, never from the header).
var ownHeaders = map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true}

// body is a response body on a Pool's connection.
type body struct {
	body io.ReadCloser
	h    *Pool
	pc   *conn
	ctx  context.Context
	stop func() bool
	keep bool // the server keeps the connection
	eof  bool
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("http: read on closed response body")
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = context.Cause(b.ctx)
	}
	return n, err
}

// Close keeps the connection for the next call when the response was read to
// its end, nothing follows it, and the call was not cancelled.
func (b *body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	stopped := b.stop()
	if b.eof && b.keep && stopped && b.pc.br.Buffered() == 0 {
		b.h.put(b.pc)
		return nil
	}
	return b.pc.nc.Close()
}

// gunzipBody is a gzip-compressed response body as the Transport hands it on:
// decompressed, read from the first Read.
type gunzipBody struct {
	body *body
	zr   *gzip.Reader
	err  error
}

func (b *gunzipBody) Read(p []byte) (int, error) {
	if b.zr == nil && b.err == nil {
		b.zr, b.err = gzip.NewReader(b.body)
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.zr.Read(p)
}

func (b *gunzipBody) Close() error { return b.body.Close() }
