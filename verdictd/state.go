package verdictd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// Buckets verdictd keeps in its bbolt file beside the store's decision records. Everything a run
// changes is written in the same commit as the run's decision record: an ask is counted, and a
// question id is bound, only if the record that asked it is stored.
var (
	bucketGate1     = []byte("verdictd_gate1")      // conversation → Gate-1 ask counters
	bucketAsks      = []byte("verdictd_asks")       // conversation \0 action key \0 slot → value ask count
	bucketQuestions = []byte("verdictd_questions")  // question id → binding
	bucketPrior     = []byte("verdictd_prior")      // action key \0 field → executed value
	bucketPriorMeta = []byte("verdictd_prior_meta") // action key → issued-at and verdict id of the receipt behind the baseline
)

// State is verdictd's durable gates.State: Gate-1 counters per (principal, conversation),
// value ask counts, question bindings and receipt-confirmed prior values, in the bbolt file
// that also holds the decision records.
//
// A State is not handed to the engine directly: each run gets a [RunState] that reads through
// to the file and buffers its writes, which [RunState.Commit] applies in the transaction that
// appends the run's record.
type State struct {
	db *store.DB
}

// NewState returns the State kept in db, creating its buckets.
func NewState(ctx context.Context, db *store.DB) (*State, error) {
	err := db.Update(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketGate1, bucketAsks, bucketQuestions, bucketPrior, bucketPriorMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verdictd state: %w", err)
	}
	return &State{db: db}, nil
}

// convKey encodes a conversation. JSON escapes control characters, so the key holds no NUL and
// convKey(c)+"\x00" is a prefix no other conversation's keys share.
func convKey(c gates.Conversation) []byte {
	b, _ := json.Marshal([2]string{c.Principal, c.ID})
	return b
}

func askKey(c gates.Conversation, actionKey, slotID string) []byte {
	k := append(convKey(c), 0)
	k = append(k, actionKey...)
	k = append(k, 0)
	return append(k, slotID...)
}

func priorKey(actionKey, field string) []byte {
	return append(append([]byte(actionKey), 0), field...)
}

// storedBinding is the file form of a gates.QuestionBinding.
type storedBinding struct {
	Principal string        `json:"principal"`
	ActionKey string        `json:"action_key"`
	SlotID    string        `json:"slot_id"`
	Kind      string        `json:"kind"`
	Value     any           `json:"value,omitempty"`
	Shown     any           `json:"shown,omitempty"`
	Origin    policy.Source `json:"origin,omitempty"`
	Options   [][]string    `json:"options,omitempty"`
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func (s *State) view(ctx context.Context, bucket, key []byte, fn func(v []byte) error) (bool, error) {
	found := false
	err := s.db.View(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		v := b.Get(key)
		if v == nil {
			return nil
		}
		found = true
		return fn(v)
	})
	return found, err
}

func (s *State) gate1(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
	var n gates.Gate1Counts
	_, err := s.view(ctx, bucketGate1, convKey(c), func(v []byte) error {
		if len(v) != 16 {
			return fmt.Errorf("gate-1 counters: %w", store.ErrCorrupt)
		}
		n.Intent = int(binary.BigEndian.Uint64(v[:8]))
		n.Tool = int(binary.BigEndian.Uint64(v[8:]))
		return nil
	})
	return n, err
}

func (s *State) slotAsks(ctx context.Context, key []byte) (int, error) {
	var n int
	_, err := s.view(ctx, bucketAsks, key, func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("ask count: %w", store.ErrCorrupt)
		}
		n = int(binary.BigEndian.Uint64(v))
		return nil
	})
	return n, err
}

func (s *State) question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	var sb storedBinding
	ok, err := s.view(ctx, bucketQuestions, []byte(id), func(v []byte) error {
		if err := decodeNumbers(v, &sb); err != nil {
			return fmt.Errorf("question binding: %w: %v", store.ErrCorrupt, err)
		}
		return nil
	})
	if err != nil || !ok {
		return gates.QuestionBinding{}, false, err
	}
	return gates.QuestionBinding{Principal: sb.Principal, ActionKey: sb.ActionKey, SlotID: sb.SlotID, Kind: sb.Kind,
		Value: sb.Value, Shown: sb.Shown, Origin: sb.Origin, Options: sb.Options}, true, nil
}

// PriorValue returns the value a receipt confirmed was executed for field under actionKey.
func (s *State) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	var v any
	ok, err := s.view(ctx, bucketPrior, priorKey(actionKey, field), func(b []byte) error {
		if err := decodeNumbers(b, &v); err != nil {
			return fmt.Errorf("prior value: %w: %v", store.ErrCorrupt, err)
		}
		return nil
	})
	return v, ok, err
}

// setPriorTx replaces the executed baseline of actionKey with values (the call arguments of
// the executed verdict), inside tx.
func setPriorTx(tx *bolt.Tx, actionKey string, values map[string]json.RawMessage) error {
	b := tx.Bucket(bucketPrior)
	prefix := priorKey(actionKey, "")
	if err := deletePrefix(b, prefix); err != nil {
		return err
	}
	for f, v := range values {
		if err := b.Put(priorKey(actionKey, f), v); err != nil {
			return err
		}
	}
	return nil
}

func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	var keys [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// RunState is the gates.State of one run: reads see the file plus this run's own writes,
// and writes stay in memory until Commit. The caller serializes runs of one conversation
// (see [convLocks]), so the read-modify-write of a counter cannot interleave with another run's.
type RunState struct {
	st        *State
	reset     map[gates.Conversation]bool
	gate1     map[gates.Conversation]gates.Gate1Counts
	asks      map[string]int
	questions map[string]storedBinding
}

var _ gates.State = (*RunState)(nil)

// Run returns a fresh RunState over s.
func (s *State) Run() *RunState {
	return &RunState{st: s}
}

func (r *RunState) Gate1Counts(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
	if n, ok := r.gate1[c]; ok {
		return n, nil
	}
	if r.reset[c] {
		return gates.Gate1Counts{}, nil
	}
	return r.st.gate1(ctx, c)
}

func (r *RunState) SetGate1Counts(_ context.Context, c gates.Conversation, n gates.Gate1Counts) error {
	if n.Intent < 0 || n.Tool < 0 {
		return errors.New("negative ask counter")
	}
	if r.gate1 == nil {
		r.gate1 = map[gates.Conversation]gates.Gate1Counts{}
	}
	r.gate1[c] = n
	return nil
}

func (r *RunState) SlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string) (int, error) {
	k := askKey(c, actionKey, slotID)
	if n, ok := r.asks[string(k)]; ok {
		return n, nil
	}
	if r.reset[c] {
		return 0, nil
	}
	return r.st.slotAsks(ctx, k)
}

func (r *RunState) SetSlotAsks(_ context.Context, c gates.Conversation, actionKey, slotID string, n int) error {
	if n < 0 {
		return errors.New("negative ask count")
	}
	if r.asks == nil {
		r.asks = map[string]int{}
	}
	r.asks[string(askKey(c, actionKey, slotID))] = n
	return nil
}

func (r *RunState) ResetConversation(_ context.Context, c gates.Conversation) error {
	if r.reset == nil {
		r.reset = map[gates.Conversation]bool{}
	}
	r.reset[c] = true
	delete(r.gate1, c)
	prefix := string(append(convKey(c), 0))
	for k := range r.asks {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(r.asks, k)
		}
	}
	return nil
}

func (r *RunState) SaveQuestion(_ context.Context, id string, b gates.QuestionBinding) error {
	if r.questions == nil {
		r.questions = map[string]storedBinding{}
	}
	r.questions[id] = storedBinding{Principal: b.Principal, ActionKey: b.ActionKey, SlotID: b.SlotID, Kind: b.Kind,
		Value: b.Value, Shown: b.Shown, Origin: b.Origin, Options: b.Options}
	return nil
}

func (r *RunState) Question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	if sb, ok := r.questions[id]; ok {
		return gates.QuestionBinding{Principal: sb.Principal, ActionKey: sb.ActionKey, SlotID: sb.SlotID, Kind: sb.Kind,
			Value: sb.Value, Shown: sb.Shown, Origin: sb.Origin, Options: sb.Options}, true, nil
	}
	return r.st.question(ctx, id)
}

func (r *RunState) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	return r.st.PriorValue(ctx, actionKey, field)
}

// Commit writes the run's changes inside tx. It may run more than once (the store's writer
// retries a batch when another function in it fails), so it only puts and deletes.
func (r *RunState) Commit(tx *bolt.Tx) error {
	if len(r.reset) == 0 && len(r.gate1) == 0 && len(r.asks) == 0 && len(r.questions) == 0 {
		return nil // a run that changed nothing (a verdict, usually) adds nothing to the commit
	}
	g1, asks, qs := tx.Bucket(bucketGate1), tx.Bucket(bucketAsks), tx.Bucket(bucketQuestions)
	for c := range r.reset {
		if err := g1.Delete(convKey(c)); err != nil {
			return err
		}
		if err := deletePrefix(asks, append(convKey(c), 0)); err != nil {
			return err
		}
	}
	for c, n := range r.gate1 {
		v := make([]byte, 16)
		binary.BigEndian.PutUint64(v[:8], uint64(n.Intent))
		binary.BigEndian.PutUint64(v[8:], uint64(n.Tool))
		if err := g1.Put(convKey(c), v); err != nil {
			return err
		}
	}
	for k, n := range r.asks {
		v := binary.BigEndian.AppendUint64(nil, uint64(n))
		if err := asks.Put([]byte(k), v); err != nil {
			return err
		}
	}
	for id, b := range r.questions {
		v, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("question binding: %w", err)
		}
		if err := qs.Put([]byte(id), v); err != nil {
			return err
		}
	}
	return nil
}

// runState is the state of one run, whichever store holds it: the engine's reads and buffered
// writes, and the two steps that make the writes durable around the record's commit.
type runState interface {
	gates.State
	// share commits the run's changes to a store shared with other replicas, before the
	// record is written; out is the record as it will be stored.
	share(ctx context.Context, rec *gates.Record, out []byte) error
	// commitTx writes the run's changes in the transaction that appends its record.
	commitTx(tx *bolt.Tx) error
	// prefetch may read ahead what the run will read of req, before the engine runs.
	prefetch(ctx context.Context, req *gates.Request) error
}

var (
	_ runState = (*RunState)(nil)
	_ runState = (*EtcdRun)(nil)
)

// The bbolt state shares nothing: all of it goes into the record's commit.
func (r *RunState) share(context.Context, *gates.Record, []byte) error { return nil }
func (r *RunState) commitTx(tx *bolt.Tx) error                         { return r.Commit(tx) }
func (r *RunState) prefetch(context.Context, *gates.Request) error     { return nil }

// The etcd state is committed before the record; the record's commit adds nothing.
func (r *EtcdRun) share(ctx context.Context, rec *gates.Record, out []byte) error {
	return r.Commit(ctx, rec, out)
}
func (r *EtcdRun) commitTx(*bolt.Tx) error { return nil }

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

// The engine holds one gates.State for its lifetime, but verdictd gives every run its own
// RunState. ctxState bridges the two: the engine passes each run's context to every State call,
// and the run's RunState travels in it. A call without one fails, so nothing is ever read from
// or written to a state that no commit will cover.
type ctxState struct{}

type runStateKey struct{}

func withRunState(ctx context.Context, rs runState) context.Context {
	return context.WithValue(ctx, runStateKey{}, rs)
}

var errNoRunState = errors.New("verdictd: state used outside a run")

func runStateOf(ctx context.Context) (runState, error) {
	rs, ok := ctx.Value(runStateKey{}).(runState)
	if !ok || rs == nil {
		return nil, errNoRunState
	}
	return rs, nil
}

func (ctxState) Gate1Counts(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
	rs, err := runStateOf(ctx)
	if err != nil {
		return gates.Gate1Counts{}, err
	}
	return rs.Gate1Counts(ctx, c)
}

func (ctxState) SetGate1Counts(ctx context.Context, c gates.Conversation, n gates.Gate1Counts) error {
	rs, err := runStateOf(ctx)
	if err != nil {
		return err
	}
	return rs.SetGate1Counts(ctx, c, n)
}

func (ctxState) SlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string) (int, error) {
	rs, err := runStateOf(ctx)
	if err != nil {
		return 0, err
	}
	return rs.SlotAsks(ctx, c, actionKey, slotID)
}

func (ctxState) SetSlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string, n int) error {
	rs, err := runStateOf(ctx)
	if err != nil {
		return err
	}
	return rs.SetSlotAsks(ctx, c, actionKey, slotID, n)
}

func (ctxState) ResetConversation(ctx context.Context, c gates.Conversation) error {
	rs, err := runStateOf(ctx)
	if err != nil {
		return err
	}
	return rs.ResetConversation(ctx, c)
}

func (ctxState) SaveQuestion(ctx context.Context, id string, b gates.QuestionBinding) error {
	rs, err := runStateOf(ctx)
	if err != nil {
		return err
	}
	return rs.SaveQuestion(ctx, id, b)
}

func (ctxState) Question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	rs, err := runStateOf(ctx)
	if err != nil {
		return gates.QuestionBinding{}, false, err
	}
	return rs.Question(ctx, id)
}

func (ctxState) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	rs, err := runStateOf(ctx)
	if err != nil {
		return nil, false, err
	}
	return rs.PriorValue(ctx, actionKey, field)
}
