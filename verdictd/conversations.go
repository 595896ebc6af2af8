package verdictd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
)

// Bounds of the conversation state each principal may hold.
const (
	// DefaultConversationTTL: a conversation paused overnight keeps its ceilings.
	DefaultConversationTTL = convstate.DefaultConversationTTL
	// MinConversationTTL: shorter, a user answering a question slowly would find the
	// conversation's counts gone; etcd leases count whole seconds anyway.
	MinConversationTTL = time.Minute
	// MaxConversationTTL: longer keeps an idle flood on disk for months.
	MaxConversationTTL = 90 * 24 * time.Hour
	// DefaultMaxConversations is how many live conversations one principal may hold.
	DefaultMaxConversations = convstate.DefaultMaxConversations
	// MaxMaxConversations: a new conversation is checked against the bound by counting the
	// principal's live conversations (on bbolt inside the commit that starts it), so the
	// bound's cost grows with it; at this bound the count takes under a millisecond.
	MaxMaxConversations = 10_000
)

// ErrConversationLimit is matched by the error of a preflight refused for it.
var ErrConversationLimit = convstate.ErrConversationLimit

// validateConversations reports the problems of conversation_ttl and
// max_conversations_per_principal.
func (c *Config) validateConversations() []error {
	var errs []error
	if ttl := c.ConversationTTL.D(); ttl != 0 && (ttl < MinConversationTTL || ttl > MaxConversationTTL) {
		errs = append(errs, confx.Place("conversation_ttl", fmt.Errorf("conversation_ttl %s: want between %s and %s", ttl, MinConversationTTL, MaxConversationTTL)))
	}
	if n := c.MaxConversationsPerPrincipal; n < 0 || n > MaxMaxConversations {
		errs = append(errs, confx.Place("max_conversations_per_principal",
			fmt.Errorf("max_conversations_per_principal %d: want between 1 and %d (0 for the default %d)", n, MaxMaxConversations, DefaultMaxConversations)))
	}
	return errs
}

// conversationTTL is conversation_ttl with its default: state_store.ttl when set, which used to
// govern the etcd store's conversations, else DefaultConversationTTL.
func (c *Config) conversationTTL() time.Duration {
	return c.ConversationTTL.Or(c.StateStore.TTL.Or(DefaultConversationTTL))
}

func (c *Config) maxConversations() int {
	return cmp.Or(c.MaxConversationsPerPrincipal, DefaultMaxConversations)
}

// conversationLimitError is the answer to a preflight refused for its principal's bound.
func conversationLimitError(max int) error {
	return httpx.Errorf(http.StatusTooManyRequests, api.CodeConversationLimit,
		"the principal already holds %d live conversations, the most allowed: continue one of them, or start a new one once one has been idle for conversation_ttl", max)
}

// collectConversations forgets idle conversations of the bbolt state every collection
// interval until ctx ends. A failed round is logged and the next one tries again: expiry is
// late, never wrong, since runs treat an expired conversation as gone whether or not it has
// been collected.
func (s *Service) collectConversations(ctx context.Context, b *convstate.Bolt) {
	t := time.NewTicker(b.CollectInterval())
	defer t.Stop()
	for {
		n, err := b.Collect(ctx)
		s.metrics.convExpired.Add(float64(n))
		if err != nil && ctx.Err() == nil {
			s.log.Error("collect idle conversations", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// conversationRefused turns ErrConversationLimit into its 429 answer, counts it and logs the
// caller that sent it; any other error of the bound's check (a shared store that did not
// answer) is returned, and counted where every preflight's error is.
func (s *Service) conversationRefused(ctx context.Context, act *authority, err error) error {
	if !errors.Is(err, ErrConversationLimit) {
		return err
	}
	s.metrics.convRefusals.WithLabelValues(api.CodeConversationLimit).Inc()
	s.log.WarnContext(ctx, "preflight refused: conversation limit", "caller", act.caller,
		"max_conversations_per_principal", s.cfg.maxConversations())
	return conversationLimitError(s.cfg.maxConversations())
}
