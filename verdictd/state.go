package verdictd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

// ErrStateUnavailable is matched by every *StateUnavailableError.
var ErrStateUnavailable = convstate.ErrUnavailable

// StateUnavailableError is a shared state store that could not answer: unreachable, timed out,
// closed, or contended past the retries. Nothing was issued: no record, no verdict, no question.
type StateUnavailableError = convstate.UnavailableError

// openState opens the conversation state of cfg's state_store section: in db for kind bbolt,
// in the etcd cluster for kind etcd; both bounded by conversation_ttl and
// max_conversations_per_principal.
func openState(ctx context.Context, cfg *Config, db *store.DB, now func() time.Time) (convstate.Store, error) {
	ss := cfg.StateStore
	if ss.Kind != StateStoreEtcd {
		return convstate.NewBolt(ctx, db, convstate.BoltOptions{
			ConversationTTL: cfg.conversationTTL(), MaxConversations: cfg.maxConversations(), Now: now,
		})
	}
	opts := ss.etcdOptions()
	opts.Now = now
	opts.ConversationTTL = cfg.conversationTTL()
	opts.MaxConversations = cfg.maxConversations()
	var err error
	if opts.Password, err = ss.readPassword(); err != nil {
		return nil, err
	}
	e, err := convstate.NewEtcd(ctx, db, opts)
	if err != nil {
		return nil, fmt.Errorf("state_store: %w", err)
	}
	return e, nil
}

// convLocks serializes the runs of one conversation: the engine reads counters and writes
// them back, and two runs interleaving there would lose an ask and lift a ceiling.
type convLocks struct {
	mu sync.Mutex
	m  map[gates.Conversation]*convLock
}

type convLock struct {
	held chan struct{} // one slot, full while a run holds the lock
	refs int
}

// lock waits for c's lock until ctx ends. A run that waited past its deadline behind others
// of the same conversation gives up without deciding anything: its answer could no longer be
// written.
func (l *convLocks) lock(ctx context.Context, c gates.Conversation) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[gates.Conversation]*convLock{}
	}
	e := l.m[c]
	if e == nil {
		e = &convLock{held: make(chan struct{}, 1)}
		l.m[c] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, c)
		}
		l.mu.Unlock()
	}
	select {
	case e.held <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, context.Cause(ctx)
	}
	return func() {
		<-e.held
		release()
	}, nil
}
