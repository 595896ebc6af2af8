package confx

import (
	"fmt"

	"github.com/verdictgate/verdict/internal/httpx"
)

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
