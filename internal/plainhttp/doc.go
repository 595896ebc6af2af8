// Package plainhttp sends HTTP/1.1 requests on the caller's goroutine.
//
// net/http's Transport runs two goroutines per connection and hands every
// request and response between them and the caller: on a two-core machine
// those hand-offs cost a small request about as much CPU as its JSON. A Pool
// sends a request to an http:// server on the caller's goroutine over a
// kept-alive connection of its own, as the Transport would send it: the same
// request line and headers (the Transport's User-Agent, Content-Length, the
// headers sorted, compression asked for and undone as the Transport asks for
// and undoes it), read with net/http's own response parser. Informational
// responses are skipped as the Transport skips them. Cancellation ends a
// request as the Transport ends one, with the context's cause. A kept
// connection the server closed before any of a request went out is replaced
// and the request sent again, as the Transport does (its nothingWrittenError);
// after a byte went out, never.
//
// Transport is a RoundTripper over Pools for the requests a Pool can send,
// and another RoundTripper (normally net/http's) for the rest: https, a
// proxy, a body of unknown length.
package plainhttp
