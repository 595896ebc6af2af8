package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// requestTimeout bounds one request, from writing it to reading the last byte of the answer, so
// that a server that stops answering fails the request instead of hanging the run.
const requestTimeout = time.Minute

// maxBody bounds a response body: a server that announces more is broken, not a load result.
const maxBody = 64 << 20

// errMalformed marks a response that does not parse as HTTP/1.1.
var errMalformed = errors.New("malformed HTTP response")

// target is where a run posts to, parsed once.
type target struct {
	addr    string        // host:port to dial
	head    []byte        // request line and headers up to and including "Content-Length: "
	timeout time.Duration // per request, dial included
}

// newTarget parses an http:// URL and renders the request head every request shares.
func newTarget(rawURL, token string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, fmt.Errorf("load target: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return target{}, fmt.Errorf("load target %q: want an http://host[:port]/path URL", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	var h []byte
	h = append(h, "POST "...)
	h = append(h, u.RequestURI()...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, u.Host...)
	h = append(h, "\r\nAuthorization: Bearer "...)
	h = append(h, token...)
	h = append(h, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	return target{addr: addr, head: h, timeout: requestTimeout}, nil
}

// conn is one closed-loop client's persistent HTTP/1.1 connection. It is not safe for
// concurrent use: each client goroutine owns one.
type conn struct {
	t    target
	nc   net.Conn      // nil until dialed, and again after the server closed it or a request failed
	br   *bufio.Reader // reads nc; reset on every new connection
	req  []byte        // the request being sent, rendered in place
	body []byte        // the last response body
}

func newConn(t target) *conn {
	return &conn{t: t, br: bufio.NewReaderSize(nil, 16<<10)}
}

// close drops the connection; the next request dials a new one.
func (c *conn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// do posts body and returns the status and the response body. The body is valid until the next
// call. Any error leaves the connection closed, so a half-read answer never corrupts the next one.
func (c *conn) do(body string) (int, []byte, error) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.t.addr, c.t.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.nc = nc
		c.br.Reset(nc)
	}
	status, keep, err := c.roundTrip(body)
	if err != nil || !keep {
		c.close()
	}
	return status, c.body, err
}

func (c *conn) roundTrip(body string) (status int, keep bool, err error) {
	if err := c.nc.SetDeadline(time.Now().Add(c.t.timeout)); err != nil {
		return 0, false, err
	}
	c.req = append(c.req[:0], c.t.head...)
	c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, body...)
	if _, err := c.nc.Write(c.req); err != nil {
		return 0, false, fmt.Errorf("write request: %w", err)
	}
	return c.readResponse()
}

// readResponse reads one response: the status line, the headers, and a body framed by
// Content-Length, chunked transfer coding, or the end of the connection. keep reports whether
// the connection may carry another request.
func (c *conn) readResponse() (status int, keep bool, err error) {
	line, err := c.readLine()
	if err != nil {
		return 0, false, fmt.Errorf("status line: %w", err)
	}
	status, http10, err := parseStatusLine(line)
	if err != nil {
		return status, false, err
	}
	h, err := c.readHeader(http10)
	if err != nil {
		return status, false, err
	}
	keep = h.keep
	c.body = c.body[:0]
	switch {
	case h.chunked && h.contentLength >= 0:
		return status, false, fmt.Errorf("%w: both Content-Length and chunked", errMalformed)
	case h.chunked:
		err = c.readChunked()
	case h.contentLength >= 0:
		err = c.readN(h.contentLength)
	case status == 204 || status == 304:
		// No body by definition.
	default:
		// No framing: the body runs to the end of the connection.
		keep = false
		err = c.readToEOF()
	}
	if err != nil {
		return status, false, fmt.Errorf("body: %w", err)
	}
	if keep && c.br.Buffered() > 0 {
		// Nothing was asked yet: these bytes would be taken for the next request's answer.
		return status, false, fmt.Errorf("%w: %d bytes after the answer", errMalformed, c.br.Buffered())
	}
	return status, keep, nil
}

// parseStatusLine reads "HTTP/1.1 200 OK": a version, a three-digit code, an optional reason.
// An interim answer (1xx) is an error, with its status: no request carries Expect:
// 100-continue.
func parseStatusLine(line []byte) (status int, http10 bool, err error) {
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(rest) < 3 || (len(rest) > 3 && rest[3] != ' ') {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	http10 = string(proto) == "HTTP/1.0"
	if !http10 && string(proto) != "HTTP/1.1" {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	for _, d := range rest[:3] {
		if d < '0' || d > '9' {
			return 0, false, fmt.Errorf("%w: status line %q", errMalformed, line)
		}
		status = status*10 + int(d-'0')
	}
	if status < 200 {
		return status, false, fmt.Errorf("%w: unexpected status %d", errMalformed, status)
	}
	return status, http10, nil
}

// header is what the load reads of a response's headers: how its body is framed, and whether
// the connection may carry another request.
type header struct {
	contentLength int64 // -1 without one
	chunked       bool
	keep          bool
}

// readHeader reads the header lines up to the empty line that ends them. A connection of
// HTTP/1.0 is kept only when the response says keep-alive, one of HTTP/1.1 unless it says
// close.
func (c *conn) readHeader(http10 bool) (header, error) {
	h := header{contentLength: -1, keep: !http10}
	for {
		line, err := c.readLine()
		if err != nil {
			return h, fmt.Errorf("header: %w", err)
		}
		if len(line) == 0 {
			return h, nil
		}
		if err := h.add(line, http10); err != nil {
			return h, err
		}
	}
}

// add reads one header line into h.
func (h *header) add(line []byte, http10 bool) error {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
		return fmt.Errorf("%w: header line %q", errMalformed, line)
	}
	value = bytes.TrimSpace(value)
	switch {
	case asciiEqualFold(name, "Content-Length"):
		n, ok := parseUint(value, 10)
		if !ok || (h.contentLength >= 0 && n != h.contentLength) {
			return fmt.Errorf("%w: Content-Length %q", errMalformed, value)
		}
		h.contentLength = n
	case asciiEqualFold(name, "Transfer-Encoding"):
		if !asciiEqualFold(value, "chunked") {
			return fmt.Errorf("%w: Transfer-Encoding %q", errMalformed, value)
		}
		h.chunked = true
	case asciiEqualFold(name, "Connection"):
		for tok := range bytes.SplitSeq(value, []byte(",")) {
			tok = bytes.TrimSpace(tok)
			if asciiEqualFold(tok, "close") {
				h.keep = false
			} else if asciiEqualFold(tok, "keep-alive") && http10 {
				h.keep = true
			}
		}
	}
	return nil
}

// readLine returns one CRLF-terminated line without its terminator. The line is valid until
// the next read.
func (c *conn) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("%w: line longer than %d bytes", errMalformed, c.br.Size())
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line, ok := bytes.CutSuffix(line, []byte("\r\n"))
	if !ok {
		return nil, fmt.Errorf("%w: line %q not ended by CRLF", errMalformed, line)
	}
	return line, nil
}

// readN appends the next n bytes to c.body.
func (c *conn) readN(n int64) error {
	if int64(len(c.body))+n > maxBody {
		return fmt.Errorf("%w: body over %d bytes", errMalformed, maxBody)
	}
	start := len(c.body)
	c.body = grow(c.body, int(n))
	if _, err := io.ReadFull(c.br, c.body[start:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// readChunked reads a chunked body (RFC 9112 §7.1): chunks of hexadecimal size, a last chunk of
// size 0, then trailer lines up to an empty line.
func (c *conn) readChunked() error {
	for {
		line, err := c.readLine()
		if err != nil {
			return fmt.Errorf("chunk size: %w", err)
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions carry nothing the load needs
		}
		line = bytes.TrimRight(line, " \t")
		n, ok := parseUint(line, 16)
		if !ok {
			return fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if n == 0 {
			break
		}
		if err := c.readN(n); err != nil {
			return err
		}
		if crlf, err := c.readLine(); err != nil || len(crlf) != 0 {
			return fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
		}
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return fmt.Errorf("trailer: %w", err)
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// readToEOF appends everything up to the end of the connection to c.body.
func (c *conn) readToEOF() error {
	for {
		if len(c.body) > maxBody {
			return fmt.Errorf("%w: body over %d bytes", errMalformed, maxBody)
		}
		c.body = grow(c.body, 4096)
		n, err := c.br.Read(c.body[len(c.body)-4096:])
		c.body = c.body[:len(c.body)-4096+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// grow extends b by n bytes, reusing its capacity when it suffices.
func grow(b []byte, n int) []byte { return slices.Grow(b, n)[:len(b)+n] }

// parseUint parses a non-empty unsigned decimal or hexadecimal number of at most 15 digits
// (enough for any body this package accepts), without allocating.
func parseUint(b []byte, base int64) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		var v int64
		switch {
		case '0' <= d && d <= '9':
			v = int64(d - '0')
		case base == 16 && 'a' <= d && d <= 'f':
			v = int64(d-'a') + 10
		case base == 16 && 'A' <= d && d <= 'F':
			v = int64(d-'A') + 10
		default:
			return 0, false
		}
		n = n*base + v
	}
	return n, true
}

// asciiEqualFold reports whether b equals s ignoring ASCII case, without allocating.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
