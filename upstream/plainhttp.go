package upstream

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sending a plain call without net/http's Transport.
//
// The Transport runs two goroutines per connection and hands every request
// and response between them and the caller: on a two-core machine those
// handoffs cost a plain call about as much CPU as all its JSON. So a plain
// call to an http:// server, made with the client's default transport (no
// HTTPClient in Options) and no proxy, is sent by plainHTTP on the caller's
// goroutine over a kept-alive connection of its own, as the Transport would
// send it: the same request line and headers (the Transport's User-Agent,
// Content-Length, the headers sorted, no compression asked for, which the
// Transport would have undone), read with net/http's own response parser.
// Informational responses are skipped as the Transport skips them; a
// redirect, which http.Client would follow, is left to the http.Client, which
// sends the call again and follows it. Cancellation ends a call as the
// Transport ends one, with the context's cause.

// plainHTTP holds the kept-alive connections of plain calls to one server.
type plainHTTP struct {
	mu     sync.Mutex
	idle   []*plainConn // most recently used last
	closed bool
}

// As http.DefaultTransport keeps them.
const (
	plainMaxIdle     = http.DefaultMaxIdleConnsPerHost
	plainIdleTimeout = 90 * time.Second
	plainDialTimeout = 30 * time.Second
	plainKeepAlive   = 30 * time.Second
	plainMax1xx      = 5
)

type plainConn struct {
	nc      net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer // writes to nc through written
	written *countingWriter
	since   time.Time // idle since
	reused  int       // calls sent on it before the current one
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

// errPlainRedirect: the server answered with a redirect, which the caller
// leaves to http.Client.
var errPlainRedirect = errors.New("redirect")

// get returns a kept-alive connection that is still open, or (and, when
// fresh, always) dials one.
func (h *plainHTTP) get(ctx context.Context, addr string, fresh bool) (*plainConn, error) {
	now := time.Now()
	for !fresh {
		h.mu.Lock()
		var pc *plainConn
		if n := len(h.idle); n > 0 {
			pc, h.idle = h.idle[n-1], h.idle[:n-1]
		}
		h.mu.Unlock()
		if pc == nil {
			break
		}
		if now.Sub(pc.since) < plainIdleTimeout && connOpen(pc.nc) {
			pc.reused++
			return pc, nil
		}
		pc.nc.Close()
	}
	d := net.Dialer{Timeout: plainDialTimeout, KeepAlive: plainKeepAlive}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: nc}
	return &plainConn{nc: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(cw), written: cw}, nil
}

// put keeps pc for the next call, or closes it.
func (h *plainHTTP) put(pc *plainConn) {
	pc.since = time.Now()
	h.mu.Lock()
	if !h.closed && len(h.idle) < plainMaxIdle {
		h.idle = append(h.idle, pc)
		pc = nil
	}
	h.mu.Unlock()
	if pc != nil {
		pc.nc.Close()
	}
}

// close closes the kept connections, and every one returned from now on.
func (h *plainHTTP) close() {
	h.mu.Lock()
	idle := h.idle
	h.idle, h.closed = nil, true
	h.mu.Unlock()
	for _, pc := range idle {
		pc.nc.Close()
	}
}

// plainHost reports the address to dial for a plain call to u without the
// Transport, or "" when the call must go through the http.Client: a scheme
// other than http, credentials in the URL, or a proxy for it (or a system
// where connOpen cannot tell a connection the server closed).
func plainHost(u *url.URL) string {
	if !canCheckConns || u.Scheme != "http" || u.User != nil || u.Host == "" || u.Opaque != "" {
		return ""
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); p != nil || err != nil {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(host, port)
}

// do sends a POST of body with header to u (whose address is addr) and
// returns the response, whose body reads from the connection; closing it
// keeps the connection when the response was read to its end.
func (h *plainHTTP) do(ctx context.Context, u *url.URL, addr string, header http.Header, body []byte) (*http.Response, error) {
	fail := func(err error) error {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return &url.Error{Op: "Post", URL: u.String(), Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(err)
	}
	// The Transport asks for gzip unless the request says what it accepts.
	gzipped := header.Get("Accept-Encoding") == "" && header.Get("Range") == ""
	var (
		pc    *plainConn
		stop  func() bool
		abort func(error) (*http.Response, error)
	)
	for fresh := false; ; fresh = true {
		var err error
		if pc, err = h.get(ctx, addr, fresh); err != nil {
			// No connection: nothing of the request was written, on this
			// attempt or (a write failed, see below) the one before.
			return nil, fmt.Errorf("%w: %w", errNotSent, fail(err))
		}
		nc := pc.nc
		stop = context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
		abort = func(err error) (*http.Response, error) {
			stop()
			pc.nc.Close()
			return nil, fail(err)
		}
		before := pc.written.n
		err = writePlainRequest(pc.bw, u, header, body, gzipped)
		if err == nil {
			break
		}
		if fresh || pc.reused == 0 || pc.written.n != before || ctx.Err() != nil {
			return abort(err)
		}
		// A kept connection the server closed before any of the request
		// went out: as the Transport does, the call is sent again on a new
		// one.
		stop()
		pc.nc.Close()
	}
	var (
		resp *http.Response
		err  error
	)
	for n := 0; ; n++ {
		if resp, err = http.ReadResponse(pc.br, nil); err != nil {
			return abort(err)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n == plainMax1xx {
			return abort(errors.New("net/http: too many 1xx informational responses"))
		}
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if resp.Header.Get("Location") != "" {
			stop()
			pc.nc.Close()
			return nil, errPlainRedirect
		}
	}
	pb := &plainBody{body: resp.Body, h: h, pc: pc, ctx: ctx, stop: stop, keep: !resp.Close}
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

// writePlainRequest writes the request as the Transport writes a POST with a
// body of known length: request line, Host, User-Agent, Content-Length, the
// other headers in order of their names, then Accept-Encoding when the
// Transport would add it.
func writePlainRequest(w *bufio.Writer, u *url.URL, header http.Header, body []byte, gzipped bool) error {
	w.WriteString("POST ")
	w.WriteString(u.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(u.Host)
	w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if v, ok := header["User-Agent"]; ok {
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
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(body)), 10))
	w.WriteString("\r\n")
	if err := header.WriteSubset(w, plainOwnHeaders); err != nil {
		return err
	}
	if gzipped {
		w.WriteString("Accept-Encoding: gzip\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	return w.Flush()
}

// plainOwnHeaders are the headers writePlainRequest writes itself (or, as
// the Transport, never from the header).
var plainOwnHeaders = map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true}

// plainBody is a response body on a plain connection.
type plainBody struct {
	body io.ReadCloser
	h    *plainHTTP
	pc   *plainConn
	ctx  context.Context
	stop func() bool
	keep bool // the server keeps the connection
	eof  bool
	done bool
}

func (b *plainBody) Read(p []byte) (int, error) {
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
func (b *plainBody) Close() error {
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
	body *plainBody
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
