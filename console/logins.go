package console

import "time"

// loginTTL bounds how long a sign-in may take at the provider.
const loginTTL = 10 * time.Minute

// A login is what the callback of a sign-in in progress needs (a flows.Flow's value). Its
// member names are those of a sign-in the shared store keeps (storedLogin).
type login struct {
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"` // the PKCE code verifier
	ReturnTo string `json:"return"`
}
