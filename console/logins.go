package console

import "time"

// loginTTL bounds how long a sign-in may take at the provider.
const loginTTL = 10 * time.Minute

// A login is what the callback of a sign-in in progress needs (a flows.Flow's value).
type login struct {
	nonce    string
	verifier string // the PKCE code verifier
	returnTo string
}
