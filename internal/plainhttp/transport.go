package plainhttp

import (
	"io"
	"net/http"
	"sync"
)

// Transport sends on Pools, one per server, the requests a Pool sends as net/http's Transport
// would, and every other one through Base: https, a proxy, a body whose bytes cannot be had
// again (no GetBody), a request that asks to close its connection or sets trailers, a Host of
// its own or an Expect header. A request it sends reports to its httptrace.ClientTrace as the
// Transport does where a caller tells a request that never left from one that may have run:
// GetConn when it asks for a connection, GotConn when it has one to write on.
//
// The zero Transport is not usable: make one with NewTransport.
type Transport struct {
	base  http.RoundTripper
	mu    sync.Mutex
	pools map[string]*Pool // by address
}

// NewTransport returns a Transport that sends what a Pool cannot through base.
func NewTransport(base http.RoundTripper) *Transport {
	return &Transport{base: base, pools: map[string]*Pool{}}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	addr := t.addr(req)
	if addr == "" {
		return t.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		rc, err := req.GetBody()
		if err == nil {
			body, err = io.ReadAll(rc)
			rc.Close()
		}
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	r := Request{Method: req.Method, URL: req.URL, Addr: addr, Header: req.Header, Body: body}
	resp, err := t.pool(addr).send(req.Context(), r) // checked by addr
	if err != nil {
		return nil, err
	}
	resp.Request = req
	return resp, nil
}

// addr is the address of req's server when a Pool sends it, else "".
func (t *Transport) addr(req *http.Request) string {
	switch {
	case req.Close, len(req.Trailer) > 0, req.Host != "" && req.Host != req.URL.Host,
		req.Header.Get("Expect") != "", req.Header.Get("Connection") != "":
		return ""
	case req.Body != nil && req.Body != http.NoBody && (req.GetBody == nil || req.ContentLength <= 0):
		return ""
	}
	switch req.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return ""
	}
	addr := Addr(req.URL)
	if addr != "" && (Request{Method: req.Method, URL: req.URL, Header: req.Header}).check() != nil {
		return "" // net/http refuses it, with its own error
	}
	return addr
}

// Base is the RoundTripper of what a Pool does not send.
func (t *Transport) Base() http.RoundTripper { return t.base }

// pool is addr's Pool.
func (t *Transport) pool(addr string) *Pool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pools[addr]
	if p == nil {
		p = new(Pool)
		t.pools[addr] = p
	}
	return p
}

// CloseIdleConnections closes the kept connections of every Pool, and those of Base.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	pools := t.pools
	t.pools = map[string]*Pool{}
	t.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
