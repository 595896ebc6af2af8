package confx

import (
	"fmt"

	"github.com/verdictgate/verdict/internal/httpx"
)

// The checks of the keys the daemons' configs have in common, each placed at its key.

// Callers checks a daemon's callers list: each entry whose token hash is not one is reported at
// its place in the file, in the words httpx.NewTokens uses, which refuses exactly these.
func Callers(callers []httpx.Token) []error {
	var errs []error
	for i, t := range callers {
		if _, err := httpx.ParseSHA256(t.TokenSHA256); err != nil {
			errs = append(errs, Place(Index("callers", i), fmt.Errorf("callers[%d] (%s): %w", i, t.Name, err)))
		}
	}
	return errs
}

// AdminToken checks admin_token_sha256: unset (no admin), or a SHA-256 in hex.
func AdminToken(hash string) []error {
	if hash == "" {
		return nil
	}
	if _, err := httpx.ParseSHA256(hash); err != nil {
		return []error{Place("admin_token_sha256", fmt.Errorf("admin_token_sha256: %w", err))}
	}
	return nil
}

// DebugListen checks debug_listen: unset (no profiles served), or a loopback address.
func DebugListen(addr string) []error {
	if addr == "" {
		return nil
	}
	if err := httpx.CheckLoopback(addr); err != nil {
		return []error{Place("debug_listen", err)}
	}
	return nil
}
