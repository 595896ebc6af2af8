package loadgen

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoHandler checks the request the load tool sends and answers according to the body:
// "big" is a 100 KiB answer without Content-Length (net/http then uses chunked coding), "deny"
// a 403, "close" an answer that closes the connection, "hangup" no answer at all; anything else
// is echoed back with a Content-Length.
func echoHandler(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		if r.Method != "POST" || r.URL.RequestURI() != "/v1/x?q=1" || r.Header.Get("Authorization") != "Bearer tok" ||
			r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(body)) || r.ProtoMinor != 1 {
			t.Errorf("request %s %s %s %v (content length %d, body %d bytes)", r.Method, r.URL, r.Proto, r.Header, r.ContentLength, len(body))
		}
		switch string(body) {
		case "big":
			w.Write(bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16))
		case "deny":
			http.Error(w, "no", http.StatusForbidden)
		case "close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("closing"))
		case "hangup":
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			c.Close()
		default:
			w.Write(body)
		}
	}
}

// newServer starts a net/http server and counts the connections clients open to it.
func newServer(t *testing.T) (url string, conns *atomic.Int64) {
	conns = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(echoHandler(t))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/x?q=1", conns
}

func TestRun(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 100<<10/16)
	for _, tc := range []struct {
		name      string
		bodies    []string
		clients   int
		wantBad   int
		wantConns int64 // 0: at most clients
	}{
		{name: "small bodies reuse connections", bodies: repeat(`{"a":1}`, 200), clients: 4},
		{name: "empty body", bodies: repeat(``, 10), clients: 2},
		{name: "large chunked body", bodies: repeat("big", 20), clients: 3},
		{name: "non-200 status", bodies: append(repeat("small", 10), "deny", "deny"), clients: 2, wantBad: 2},
		{name: "server closes the connection", bodies: repeat("close", 30), clients: 3, wantConns: 30},
		{name: "server hangs up without answering", bodies: append(repeat("small", 10), "hangup"), clients: 2, wantBad: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, conns := newServer(t)
			ok := func(status int, body []byte) bool {
				switch {
				case status != 200:
					return false
				case len(body) == len(big):
					return string(body) == big
				default:
					return string(body) == "small" || string(body) == `{"a":1}` || string(body) == "" || string(body) == "closing"
				}
			}
			res, err := Run(url, "tok", tc.bodies, tc.clients, ok)
			if res.N != len(tc.bodies) || res.Bad != tc.wantBad || len(res.Lat) != len(tc.bodies) {
				t.Errorf("N %d, bad %d, latencies %d; want %d, %d, %d", res.N, res.Bad, len(res.Lat), len(tc.bodies), tc.wantBad, len(tc.bodies))
			}
			if (err != nil) != (tc.wantBad > 0) {
				t.Errorf("err = %v, want an error: %v", err, tc.wantBad > 0)
			}
			n := conns.Load()
			switch {
			case tc.wantConns > 0 && n != tc.wantConns:
				t.Errorf("%d connections, want %d", n, tc.wantConns)
			case tc.wantConns == 0 && n > int64(tc.clients)+int64(tc.wantBad):
				t.Errorf("%d connections for %d clients: keep-alive not reused", n, tc.clients)
			}
		})
	}
}

func TestRunBadURL(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:1/x", "127.0.0.1:1/x", "http:///x", "http://[::1"} {
		if _, err := Run(u, "tok", []string{"x"}, 1, nil); err == nil {
			t.Errorf("Run(%q): no error", u)
		}
	}
}

// rawServer answers every request on a connection with the given bytes, then closes it if
// closeAfter is set, and reports each request it read.
func rawServer(t *testing.T, answer string, closeAfter bool) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answer); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestConnResponses reads hand-written answers: every framing the client supports, and
// malformed answers, which must fail the request, never hang it.
func TestConnResponses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     string
		closeAfter bool
		wantStatus int
		wantBody   string
		wantErr    bool
	}{
		{name: "content length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", wantStatus: 200, wantBody: "hello"},
		{name: "header case and spacing", answer: "HTTP/1.1 201 Created\r\ncontent-length:   2  \r\nX-A: b\r\n\r\nhi", wantStatus: 201, wantBody: "hi"},
		{name: "no reason phrase", answer: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", wantStatus: 200},
		{name: "chunked with extension and trailer", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", wantStatus: 200, wantBody: "abc0123456789"},
		{name: "204 without length", answer: "HTTP/1.1 204 No Content\r\n\r\n", wantStatus: 204},
		{name: "body to the end of the connection", answer: "HTTP/1.1 200 OK\r\n\r\nuntil close", closeAfter: true, wantStatus: 200, wantBody: "until close"},
		{name: "HTTP/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", closeAfter: true, wantStatus: 200, wantBody: "ok"},
		{name: "garbage", answer: "hello there\r\n\r\n", wantErr: true},
		{name: "bad version", answer: "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", wantErr: true},
		{name: "bad status", answer: "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", wantErr: true},
		{name: "interim status", answer: "HTTP/1.1 100 Continue\r\n\r\n", wantErr: true},
		{name: "bare LF", answer: "HTTP/1.1 200 OK\nContent-Length: 0\n\n", wantErr: true},
		{name: "bad content length", answer: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: true},
		{name: "conflicting content lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", wantErr: true},
		{name: "huge content length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", wantErr: true},
		{name: "truncated body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", closeAfter: true, wantErr: true},
		{name: "truncated headers", answer: "HTTP/1.1 200 OK\r\nContent-Len", closeAfter: true, wantErr: true},
		{name: "header without colon", answer: "HTTP/1.1 200 OK\r\nBroken\r\n\r\n", wantErr: true},
		{name: "both framings", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantErr: true},
		{name: "unknown transfer coding", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", wantErr: true},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: true},
		{name: "chunk without CRLF", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", wantErr: true},
		{name: "truncated chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", closeAfter: true, wantErr: true},
		{name: "no answer at all", answer: "", closeAfter: true, wantErr: true},
		{name: "answer never ends", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", wantErr: true},
		{name: "more than was asked", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", wantErr: true},
		{name: "long header line", answer: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 32<<10) + "\r\n\r\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := rawServer(t, tc.answer, tc.closeAfter)
			tg, err := newTarget("http://"+addr+"/p", "tok")
			if err != nil {
				t.Fatal(err)
			}
			tg.timeout = 2 * time.Second
			c := newConn(tg)
			defer c.close()
			// Twice: the second request shows the connection (or its replacement) is usable.
			for i := range 2 {
				// An answer that never ends is bounded by tg.timeout, which the error shows.
				status, body, err := c.do("{}")
				if tc.wantErr {
					if err == nil {
						t.Fatalf("request %d: status %d body %q, want an error", i, status, body)
					}
					if c.nc != nil {
						t.Fatalf("request %d: connection kept after an error", i)
					}
					continue
				}
				if err != nil || status != tc.wantStatus || string(body) != tc.wantBody {
					t.Fatalf("request %d: %d %q %v, want %d %q", i, status, body, err, tc.wantStatus, tc.wantBody)
				}
				if (c.nc == nil) != tc.closeAfter {
					t.Fatalf("request %d: connection kept %v, want %v", i, c.nc != nil, !tc.closeAfter)
				}
			}
		})
	}
}

func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		base int64
		want int64
		ok   bool
	}{
		{"0", 10, 0, true}, {"123", 10, 123, true}, {"ff", 16, 255, true}, {"FF", 16, 255, true},
		{"", 10, 0, false}, {"ff", 10, 0, false}, {"-1", 10, 0, false}, {"+1", 10, 0, false}, {" 1", 10, 0, false},
		{"999999999999999", 10, 999999999999999, true}, {"9999999999999999", 10, 0, false},
	} {
		got, ok := parseUint([]byte(tc.in), tc.base)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseUint(%q, %d) = %d, %v; want %d, %v", tc.in, tc.base, got, ok, tc.want, tc.ok)
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
