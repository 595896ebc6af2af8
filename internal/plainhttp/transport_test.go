package plainhttp_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/verdictgate/verdict/internal/plainhttp"
)

// rawServer accepts connections on loopback and records the bytes of every request it reads,
// answering each with answer. Each request must have a body of known length or none.
type rawServer struct {
	ln     net.Listener
	conns  atomic.Int64
	mu     sync.Mutex
	seen   []string
	answer string
}

func newRawServer(t *testing.T, answer string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, answer: answer}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			wg.Go(func() { s.serve(nc) })
		}
	})
	return s
}

// serve reads requests off nc until it closes, recording each as it came.
func (s *rawServer) serve(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for {
		var raw bytes.Buffer
		req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(br, &raw)))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		s.seen = append(s.seen, raw.String())
		s.mu.Unlock()
		if _, err := io.WriteString(nc, s.answer); err != nil {
			return
		}
	}
}

// last is the last request read, as its bytes.
func (s *rawServer) last(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		t.Fatal("no request read")
	}
	return s.seen[len(s.seen)-1]
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"

// A request sent by a Pool reaches the server byte for byte as net/http's Transport sends it.
func TestTransportWritesWhatTheTransportWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		body   string
		header http.Header
	}{
		{"post", http.MethodPost, `{"a":1}`, http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer x"}}},
		{"post empty", http.MethodPost, "", nil},
		{"get", http.MethodGet, "", http.Header{"X-B": {"2", "3"}, "X-A": {"1"}}},
		{"get with query", http.MethodGet, "", nil},
		{"delete", http.MethodDelete, "", http.Header{"Authorization": {"Bearer y"}}},
		{"put", http.MethodPut, "abc", nil},
		{"own user agent", http.MethodPost, "x", http.Header{"User-Agent": {"verdict/1"}}},
		{"no user agent", http.MethodPost, "x", http.Header{"User-Agent": {""}}},
		{"accepts identity", http.MethodGet, "", http.Header{"Accept-Encoding": {"identity"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, okAnswer)
			target := "http://" + s.ln.Addr().String() + "/v1/x?q=1&r=%2F"
			send := func(rt http.RoundTripper) string {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req, err := http.NewRequestWithContext(t.Context(), tc.method, target, body)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.header {
					req.Header[k] = v
				}
				resp, err := (&http.Client{Transport: rt}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != `{"ok":true}` || resp.Request != req {
					t.Fatalf("answer %d %q", resp.StatusCode, b)
				}
				return s.last(t)
			}
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			want := send(base)
			pt := plainhttp.NewTransport(failing{t})
			t.Cleanup(pt.CloseIdleConnections)
			if got := send(pt); got != want {
				t.Fatalf("sent\n%q\nwant, as the Transport sends it,\n%q", got, want)
			}
		})
	}
}

// failing is a base transport that must not be used.
type failing struct{ t *testing.T }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) {
	f.t.Error("a request a Pool sends went to the base transport")
	return nil, errors.New("not here")
}

// recording is a base transport that counts what it was given and sends it.
type recording struct {
	n    atomic.Int64
	base http.RoundTripper
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.n.Add(1)
	return r.base.RoundTrip(req)
}

// What a Pool cannot send as the Transport would goes to the base transport.
func TestTransportLeavesTheRestToBase(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(hs.Close)
	tlsSrv := httptest.NewTLSServer(hs.Config.Handler)
	t.Cleanup(tlsSrv.Close)
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"https", func() *http.Request { r, _ := http.NewRequest("GET", tlsSrv.URL, nil); return r }},
		{"body of unknown length", func() *http.Request {
			r, _ := http.NewRequest("POST", hs.URL, io.MultiReader(strings.NewReader("x")))
			return r
		}},
		{"close", func() *http.Request { r, _ := http.NewRequest("GET", hs.URL, nil); r.Close = true; return r }},
		{"own host", func() *http.Request { r, _ := http.NewRequest("GET", hs.URL, nil); r.Host = "elsewhere"; return r }},
		{"expect", func() *http.Request {
			r, _ := http.NewRequest("POST", hs.URL, strings.NewReader("x"))
			r.Header.Set("Expect", "100-continue")
			return r
		}},
		{"head", func() *http.Request { r, _ := http.NewRequest("HEAD", hs.URL, nil); return r }},
		{"credentials in the url", func() *http.Request {
			u, _ := url.Parse(hs.URL)
			u.User = url.UserPassword("a", "b")
			r, _ := http.NewRequest("GET", u.String(), nil)
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &recording{base: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}}
			pt := plainhttp.NewTransport(base)
			t.Cleanup(pt.CloseIdleConnections)
			resp, err := pt.RoundTrip(tc.req())
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if base.n.Load() != 1 {
				t.Fatalf("the base transport sent %d requests, want 1", base.n.Load())
			}
		})
	}
}

// Requests one after the other share one connection; a compressed answer is undone as the
// Transport undoes it.
func TestTransportKeepsItsConnection(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte(`{"ok":true}`))
	zw.Close()
	s := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "+strconv.Itoa(zipped.Len())+"\r\n\r\n"+zipped.String())
	pt := plainhttp.NewTransport(failing{t})
	t.Cleanup(pt.CloseIdleConnections)
	c := &http.Client{Transport: pt}
	for range 5 {
		resp, err := c.Post("http://"+s.ln.Addr().String()+"/", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != `{"ok":true}` || !resp.Uncompressed {
			t.Fatalf("answer %q, %v (uncompressed %v)", b, err, resp.Uncompressed)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("5 requests opened %d connections", n)
	}
}

// A request that reaches no connection is marked ErrNotSent, and its trace hears that a
// connection was asked for and none handed over; one that was written hears of its connection.
func TestTransportTellsWhatWasSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	s := newRawServer(t, okAnswer)
	for _, tc := range []struct {
		name    string
		url     string
		notSent bool
	}{
		{"refused", refused, true},
		{"answered", "http://" + s.ln.Addr().String() + "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked, got atomic.Int64
			ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
				GetConn: func(string) { asked.Add(1) },
				GotConn: func(httptrace.GotConnInfo) { got.Add(1) },
			})
			req, _ := http.NewRequestWithContext(ctx, "POST", tc.url, strings.NewReader("{}"))
			pt := plainhttp.NewTransport(failing{t})
			t.Cleanup(pt.CloseIdleConnections)
			resp, err := (&http.Client{Transport: pt}).Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if errors.Is(err, plainhttp.ErrNotSent) != tc.notSent {
				t.Fatalf("error %v: marked not sent %v, want %v", err, !tc.notSent, tc.notSent)
			}
			if asked.Load() != 1 || (got.Load() == 1) == tc.notSent {
				t.Fatalf("trace: %d connections asked for, %d handed over", asked.Load(), got.Load())
			}
		})
	}
}

// A request whose context ends while the server holds it ends with the context's cause, and
// its connection is not kept.
func TestTransportCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	read := make(chan struct{})
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		http.ReadRequest(bufio.NewReader(nc))
		close(read)
		io.Copy(io.Discard, nc) // holds the request until the client goes
	}()
	cause := errors.New("the call was abandoned")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() { <-read; cancel(cause) }()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+ln.Addr().String()+"/", strings.NewReader("{}"))
	pt := plainhttp.NewTransport(failing{t})
	t.Cleanup(pt.CloseIdleConnections)
	_, err = (&http.Client{Transport: pt}).Do(req)
	if !errors.Is(err, cause) || errors.Is(err, plainhttp.ErrNotSent) {
		t.Fatalf("error %v, want the cause and not marked unsent", err)
	}
}

// What net/http's Transport would refuse to write is never written by a Pool: the Transport
// hands it to its base (which refuses it with its own error), and a Pool's Do refuses it as
// not sent. A header value that would end the line, a User-Agent included, is the case that
// would split one request into two.
func TestInvalidRequestsAreNotWritten(t *testing.T) {
	s := newRawServer(t, okAnswer)
	base := "http://" + s.ln.Addr().String() + "/"
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"user agent with a line break", func() *http.Request {
			r, _ := http.NewRequest("POST", base, strings.NewReader("{}"))
			r.Header.Set("User-Agent", "x\r\nX-Injected: 1")
			return r
		}},
		{"header value with a line break", func() *http.Request {
			r, _ := http.NewRequest("POST", base, strings.NewReader("{}"))
			r.Header["X-A"] = []string{"a\r\nPOST /other HTTP/1.1"}
			return r
		}},
		{"header value with NUL", func() *http.Request {
			r, _ := http.NewRequest("GET", base, nil)
			r.Header["X-A"] = []string{"a\x00b"}
			return r
		}},
		{"header name with a space", func() *http.Request {
			r, _ := http.NewRequest("GET", base, nil)
			r.Header["X A"] = []string{"a"}
			return r
		}},
		{"query with a line break", func() *http.Request {
			r, _ := http.NewRequest("GET", base, nil)
			r.URL.RawQuery = "a=1 HTTP/1.1\r\nX-Smuggled: 1\r\nY:"
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recording{base: &http.Transport{}}
			pt := plainhttp.NewTransport(rec)
			t.Cleanup(pt.CloseIdleConnections)
			resp, err := pt.RoundTrip(tc.req())
			if err == nil {
				resp.Body.Close()
			}
			if rec.n.Load() != 1 || err == nil {
				t.Fatalf("base used %d times, error %v: want net/http's refusal", rec.n.Load(), err)
			}
			r := tc.req()
			var p plainhttp.Pool
			t.Cleanup(p.Close)
			var body []byte
			if r.Body != nil {
				body, _ = io.ReadAll(r.Body)
			}
			if _, err := p.Do(t.Context(), plainhttp.Request{Method: r.Method, URL: r.URL, Addr: s.ln.Addr().String(), Header: r.Header, Body: body}); !errors.Is(err, plainhttp.ErrNotSent) {
				t.Fatalf("Pool.Do: %v, want ErrNotSent", err)
			}
			s.mu.Lock()
			n := len(s.seen)
			s.mu.Unlock()
			if n != 0 {
				t.Fatalf("the server read %d requests", n)
			}
		})
	}
}

// A server that answers with a header without end, or switches protocols, ends the request
// with an error, and its connection is not kept.
func TestTransportRefusesBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		want         string
	}{
		{"header without end", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", 11<<20), "exceeded"},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n", "switched protocols"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, tc.answer)
			var p plainhttp.Pool
			t.Cleanup(p.Close)
			u, _ := url.Parse("http://" + s.ln.Addr().String() + "/")
			_, err := p.Do(t.Context(), plainhttp.Request{Method: "POST", URL: u, Addr: s.ln.Addr().String(), Body: []byte("{}")})
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, plainhttp.ErrNotSent) {
				t.Fatalf("error %v, want one saying %q, not marked unsent", err, tc.want)
			}
			if kept := p.Kept(); len(kept) != 0 {
				t.Fatalf("%d connections kept", len(kept))
			}
		})
	}
}
