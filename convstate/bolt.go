package convstate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

// Buckets the state keeps in the bbolt file beside the store's decision records. Everything a
// run changes is written in the same commit as the run's decision record: an ask is counted,
// and a question id is bound, only if the record that asked it is stored.
var (
	bucketGate1     = []byte("verdictd_gate1")         // conversation → Gate-1 ask counters
	bucketAsks      = []byte("verdictd_asks")          // conversation \0 action key \0 slot → value ask count
	bucketQuestions = []byte("verdictd_questions")     // question id → binding
	bucketPrior     = []byte("verdictd_prior")         // action key \0 field → executed value
	bucketPriorMeta = []byte("verdictd_prior_meta")    // action key → issued-at and verdict id of the receipt behind the baseline
	bucketUses      = []byte("verdictd_deferred_uses") // deferred record id → Uses
	bucketTouched   = []byte("verdictd_conv_touched")  // conversation → last change (Unix ms, 8 bytes)
	bucketExpiry    = []byte("verdictd_conv_expiry")   // last change (Unix ms) ‖ conversation → nothing
)

// Bolt is the conversation state of one replica, in the bbolt file that also holds its
// decision records. Deferred intents are the replica's deferred records themselves.
type Bolt struct {
	records
	decisions *store.Decisions
	ttl       time.Duration
	max       int
	every     time.Duration
	gcBatch   int
	now       func() time.Time
}

// BoltOptions configure a [Bolt]. The zero value is usable.
type BoltOptions struct {
	// ConversationTTL is how long a conversation's ask counters live after its last change.
	// Zero means DefaultConversationTTL.
	ConversationTTL time.Duration
	// MaxConversations bounds the live conversations of one principal. Zero means no bound.
	MaxConversations int
	// GCInterval is how often Run collects expired conversations. Zero means ConversationTTL/24,
	// at least a second and at most ten minutes.
	GCInterval time.Duration
	// GCBatch caps the conversations one collection commit forgets, so collection never holds
	// the writer long. Zero means 1,000.
	GCBatch int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Fault, if set, is asked before each step of a commit (StepSend, StepState, ...) and fails
	// the commit there with its error: the tests' fault injection. A daemon leaves it nil.
	Fault func(step string) error
}

var _ Store = (*Bolt)(nil)

// NewBolt returns the state kept in db, creating its buckets. Conversations stored by a
// version that kept no time of change are given the present one, so they expire in turn.
func NewBolt(ctx context.Context, db *store.DB, opts BoltOptions) (*Bolt, error) {
	s := &Bolt{records: records{db: db, fault: opts.Fault}, decisions: db.Decisions(), ttl: opts.ConversationTTL, max: opts.MaxConversations,
		every: opts.GCInterval, gcBatch: opts.GCBatch, now: opts.Now}
	if s.ttl <= 0 {
		s.ttl = DefaultConversationTTL
	}
	if s.every <= 0 {
		s.every = min(max(s.ttl/24, time.Second), 10*time.Minute)
	}
	if s.gcBatch <= 0 {
		s.gcBatch = 1000
	}
	if s.now == nil {
		s.now = time.Now
	}
	err := db.Update(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketGate1, bucketAsks, bucketQuestions, bucketPrior, bucketPriorMeta, bucketUses,
			bucketTouched, bucketExpiry} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return s.backfillTx(tx)
	})
	if err != nil {
		return nil, fmt.Errorf("convstate: %w", err)
	}
	return s, nil
}

// Close does nothing: the file belongs to its opener.
func (s *Bolt) Close() error { return nil }

func askKey(c gates.Conversation, actionKey, slotID string) []byte {
	k := append(convKey(c), 0)
	k = append(k, actionKey...)
	k = append(k, 0)
	return append(k, slotID...)
}

func priorKey(actionKey, field string) []byte {
	return append(append([]byte(actionKey), 0), field...)
}

func (s *Bolt) view(ctx context.Context, bucket, key []byte, fn func(v []byte) error) (bool, error) {
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

func (s *Bolt) gate1(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
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

func (s *Bolt) slotAsks(ctx context.Context, key []byte) (int, error) {
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

func (s *Bolt) question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	var sb storedBinding
	ok, err := s.view(ctx, bucketQuestions, []byte(id), func(v []byte) error {
		if err := apijson.Unmarshal(v, &sb); err != nil {
			return fmt.Errorf("question binding: %w: %v", store.ErrCorrupt, err)
		}
		return nil
	})
	if err != nil || !ok {
		return gates.QuestionBinding{}, false, err
	}
	return gates.QuestionBinding(sb), true, nil
}

// priorValue returns the value a receipt confirmed was executed for field under actionKey.
func (s *Bolt) priorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	var v any
	ok, err := s.view(ctx, bucketPrior, priorKey(actionKey, field), func(b []byte) error {
		if err := apijson.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("prior value: %w: %v", store.ErrCorrupt, err)
		}
		return nil
	})
	return v, ok, err
}

// SetBaseline replaces the executed baseline of actionKey with b.Values in one commit, if b
// is newer than the stored baseline.
//
// A receipt that would change nothing (posted again, or older than the baseline) is answered
// from a read, without a commit: replaying receipts costs reads, never the writer's time.
func (s *Bolt) SetBaseline(ctx context.Context, actionKey string, b Baseline) (BaselineResult, error) {
	meta, _ := json.Marshal(map[string]any{"iat": b.IssuedAt, "jti": b.VerdictID, "record_id": b.RecordID})
	var res BaselineResult
	if err := s.db.View(ctx, func(tx *bolt.Tx) error {
		res = compareBaseline(&b, storedBaseline(tx, actionKey))
		return nil
	}); err != nil {
		return 0, fmt.Errorf("convstate: baseline: %w", err)
	}
	if res != BaselineApplied {
		return res, nil
	}
	// Decided again in the commit: another receipt of the key may have committed since.
	err := s.db.Update(ctx, func(tx *bolt.Tx) error {
		if res = compareBaseline(&b, storedBaseline(tx, actionKey)); res != BaselineApplied {
			return nil
		}
		if err := setPriorTx(tx, actionKey, b.Values); err != nil {
			return err
		}
		return tx.Bucket(bucketPriorMeta).Put([]byte(actionKey), meta)
	})
	if err != nil {
		return 0, fmt.Errorf("convstate: baseline: %w", err)
	}
	return res, nil
}

// storedBaseline is actionKey's baseline as stored, or nil; an unreadable value is nil, so that
// it is replaced.
func storedBaseline(tx *bolt.Tx, actionKey string) *Baseline {
	old := tx.Bucket(bucketPriorMeta).Get([]byte(actionKey))
	if old == nil {
		return nil
	}
	cur := new(Baseline)
	if json.Unmarshal(old, cur) != nil {
		return nil
	}
	return cur
}

// setPriorTx replaces the executed values of actionKey with values, inside tx.
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

// Deferred returns the latest deferred record of actionKey among the replica's records.
func (s *Bolt) Deferred(ctx context.Context, actionKey string) (*api.Record, error) {
	var last *store.Decision
	err := s.decisions.ByActionKey(ctx, actionKey, func(d *store.Decision) error {
		if d.Outcome == api.OutcomeDeferred {
			last = d
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("convstate: read deferred records: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	var rec api.Record
	if err := apijson.Unmarshal(last.Record, &rec); err != nil {
		return nil, fmt.Errorf("convstate: deferred record %s: %w: %v", last.RecordID, store.ErrCorrupt, err)
	}
	return &rec, nil
}

// uses reads the uses of a deferred record.
func (s *Bolt) uses(ctx context.Context, recordID string) (Uses, error) {
	var u Uses
	_, err := s.view(ctx, bucketUses, []byte(recordID), func(v []byte) error {
		if err := json.Unmarshal(v, &u); err != nil || u.Count < 0 {
			return fmt.Errorf("deferred uses: %w", store.ErrCorrupt)
		}
		return nil
	})
	return u, err
}

// Verdict returns nil: every verdict this replica knows is in its own records.
func (s *Bolt) Verdict(context.Context, string) (*Verdict, error) { return nil, nil }

// Begin returns a fresh run over s.
func (s *Bolt) Begin() Run {
	return &boltRun{st: s, checked: map[gates.Conversation]bool{}, written: map[gates.Conversation]bool{},
		reset: map[gates.Conversation]bool{}, gate1: map[gates.Conversation]gates.Gate1Counts{}, asks: map[string]int{},
		read: map[string]Uses{}, runWrites: newRunWrites()}
}

// boltRun is the state of one run on the bbolt state: reads see the file plus this run's own
// writes, and writes stay in memory until Commit. The caller serializes runs of one
// conversation, so the read-modify-write of a counter cannot interleave with another run's.
type boltRun struct {
	st      *Bolt
	checked map[gates.Conversation]bool // conversations whose expiry this run has looked at
	written map[gates.Conversation]bool // conversations whose counters this run sets
	reset   map[gates.Conversation]bool
	gate1   map[gates.Conversation]gates.Gate1Counts
	asks    map[string]int
	// read are the uses this run read, by deferred record id.
	read map[string]Uses
	runWrites
}

func (r *boltRun) Uses(ctx context.Context, recordID string) (Uses, error) {
	u, err := r.st.uses(ctx, recordID)
	if err != nil {
		return Uses{}, err
	}
	r.read[recordID] = u
	return u, nil
}

func (r *boltRun) Gate1Counts(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
	if err := r.check(ctx, c); err != nil {
		return gates.Gate1Counts{}, err
	}
	if n, ok := r.gate1[c]; ok {
		return n, nil
	}
	if r.reset[c] {
		return gates.Gate1Counts{}, nil
	}
	return r.st.gate1(ctx, c)
}

func (r *boltRun) SetGate1Counts(_ context.Context, c gates.Conversation, n gates.Gate1Counts) error {
	if n.Intent < 0 || n.Tool < 0 {
		return errors.New("negative ask counter")
	}
	r.gate1[c] = n
	r.write(c)
	return nil
}

func (r *boltRun) SlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string) (int, error) {
	if err := r.check(ctx, c); err != nil {
		return 0, err
	}
	k := askKey(c, actionKey, slotID)
	if n, ok := r.asks[string(k)]; ok {
		return n, nil
	}
	if r.reset[c] {
		return 0, nil
	}
	return r.st.slotAsks(ctx, k)
}

func (r *boltRun) SetSlotAsks(_ context.Context, c gates.Conversation, actionKey, slotID string, n int) error {
	if n < 0 {
		return errors.New("negative ask count")
	}
	r.asks[string(askKey(c, actionKey, slotID))] = n
	r.write(c)
	return nil
}

func (r *boltRun) ResetConversation(_ context.Context, c gates.Conversation) error {
	r.reset[c] = true
	delete(r.written, c)
	delete(r.gate1, c)
	prefix := string(append(convKey(c), 0))
	maps.DeleteFunc(r.asks, func(k string, _ int) bool { return strings.HasPrefix(k, prefix) })
	return nil
}

func (r *boltRun) Question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	if sb, ok := r.questions[id]; ok {
		return gates.QuestionBinding(sb), true, nil
	}
	return r.st.question(ctx, id)
}

func (r *boltRun) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	return r.st.priorValue(ctx, actionKey, field)
}

// Prefetch reads nothing ahead: the file is local.
func (r *boltRun) Prefetch(context.Context, *api.Request) error { return nil }

// Commit writes the run's changes, w's approval and w's record in one transaction.
func (r *boltRun) Commit(ctx context.Context, w *Write) error {
	return r.st.commitWrite(ctx, w, nil, r.commitTx)
}

// commitTx writes the run's changes in tx, the transaction of its record. It may run more than
// once (the store's writer retries a batch), so it only puts and deletes.
func (r *boltRun) commitTx(tx *bolt.Tx) error {
	if r.consumed != nil {
		if err := r.consumeTx(tx); err != nil {
			return err
		}
	}
	if len(r.reset) == 0 && len(r.gate1) == 0 && len(r.asks) == 0 && len(r.questions) == 0 {
		return nil // a run that changed nothing (a verdict, usually) adds nothing to the commit
	}
	g1, asks, qs := tx.Bucket(bucketGate1), tx.Bucket(bucketAsks), tx.Bucket(bucketQuestions)
	for c := range r.reset {
		if err := forgetTx(tx, convKey(c)); err != nil {
			return err
		}
	}
	// Checked here, in the commit, and not only before the run: two first runs of one
	// principal's different conversations cannot both take the last place.
	for c := range r.written {
		if err := r.st.touchTx(tx, c); err != nil {
			return err
		}
	}
	for c, n := range r.gate1 {
		v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(n.Intent)), uint64(n.Tool))
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

// consumeTx writes the run's consumed occurrence, provided the uses are still those the run
// read: the same check the shared store makes by revision.
func (r *boltRun) consumeTx(tx *bolt.Tx) error {
	c := r.consumed
	b := tx.Bucket(bucketUses)
	var cur Uses
	if v := b.Get([]byte(c.recordID)); v != nil {
		if err := json.Unmarshal(v, &cur); err != nil {
			return fmt.Errorf("deferred uses: %w", store.ErrCorrupt)
		}
	}
	if read, ok := r.read[c.recordID]; !ok || read != cur {
		return ErrUsesMoved
	}
	v, err := json.Marshal(c.uses)
	if err != nil {
		return err
	}
	return b.Put([]byte(c.recordID), v)
}
