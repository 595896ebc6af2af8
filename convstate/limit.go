package convstate

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/verdictgate/verdict/api"
)

// Defaults of the bounds on conversations, on either backend.
const (
	// DefaultConversationTTL is how long a conversation's state lives after its last change:
	// a working day and a night, so that a conversation paused overnight keeps its ceilings.
	DefaultConversationTTL = 24 * time.Hour
	// DefaultMaxConversations is how many live conversations one principal may hold.
	DefaultMaxConversations = 1000
)

// ErrConversationLimit is a preflight that would start a new conversation while its principal
// already holds the most live conversations allowed. Nothing of it is recorded.
var ErrConversationLimit = errors.New("convstate: " + api.CodeConversationLimit)

// principalPrefix is the prefix of convKey shared by every conversation of principal p and by
// no other principal's: the JSON string of p ends with an unescaped quote, then the comma.
func principalPrefix(p string) []byte {
	b, _ := json.Marshal(p)
	return append(append([]byte{'['}, b...), ',')
}
