package convstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/verdictgate/verdict/api"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/store"
)

// Defaults of the etcd state.
const (
	// DefaultTTL is how long conversation counters, question bindings and verdict summaries
	// live after their last write.
	DefaultTTL = 24 * time.Hour
)

// EtcdOptions configure an [Etcd]. Endpoints is required; the rest have defaults.
type EtcdOptions struct {
	// Endpoints are the cluster's client URLs (http://host:port, or https:// with TLS).
	Endpoints []string
	// Prefix is the deployment's key prefix; every replica of one deployment uses the same.
	// Empty means etcdx.DefaultPrefix. Keys are Prefix + "verdictd/" + kind + "/" + sha256(name).
	Prefix string
	TLS    *etcdx.TLS
	// Username and Password authenticate with etcd's own auth; both or neither.
	Username, Password string
	// DialTimeout bounds fetching an auth token at NewEtcd. Zero means
	// etcdx.DefaultDialTimeout. Connections are made lazily: NewEtcd succeeds with every
	// endpoint down, and preflights fail until one answers.
	DialTimeout time.Duration
	// RequestTimeout bounds each read and each commit. Zero means etcdx.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// TTL is how long conversation counters, question bindings and verdict summaries live after
	// their last write. Zero means DefaultTTL.
	TTL time.Duration
	// DeferredTTL, if set, is how long a deferred intent lives after its last deferred run.
	DeferredTTL time.Duration
	// ConversationTTL is how long a conversation's ask counters live after their last change.
	// Zero means TTL.
	ConversationTTL time.Duration
	// MaxConversations bounds the live conversations of one principal. Zero means no bound.
	MaxConversations int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Fault, if set, is asked before each step of a commit (StepSend, StepState, ...) and fails
	// the commit there with its error: the tests' fault injection. A daemon leaves it nil.
	Fault func(step string) error
}

// Etcd is the conversation state shared by several verdictd replicas in an etcd cluster:
// per conversation one key with its Gate-1 counters and value ask counts; one key per issued
// question id; per action key its deferred intent and its receipt-confirmed prior values; and
// per issued verdict the summary a receipt is checked against, so that a receipt can reach any
// replica. Decision records stay in each replica's bbolt file, written by the commit after the
// state.
//
// A run reads through to etcd and buffers its writes in its [Run]; its commit sends them in one
// transaction that also compares the revision of every conversation it read, so two replicas
// deciding one conversation at once cannot both count from the same value: the loser decides
// again. Every failure to get a definite answer is an [*UnavailableError], and the preflight
// that met it issues nothing.
type Etcd struct {
	records
	cli         *clientv3.Client
	keys        string // Prefix + "verdictd/"
	timeout     time.Duration
	ttl         time.Duration
	deferredTTL time.Duration
	convTTL     time.Duration
	max         int
	now         func() time.Time
	closed      atomic.Bool
	leases      *etcdx.Leases[leaseKey]
}

// leaseKey names the lease shared by every write of one TTL within one time bucket.
type leaseKey struct {
	ttl    time.Duration
	bucket int64
}

var _ Store = (*Etcd)(nil)

// NewEtcd connects to the cluster in opts; db is the replica's own file, where each commit
// writes its record once the state is sent. It does not wait for the cluster to answer (only
// for an auth token when Username is set).
func NewEtcd(ctx context.Context, db *store.DB, opts EtcdOptions) (*Etcd, error) {
	// The endpoints are checked without connecting; the credentials when the client is made,
	// once the password file has been read.
	if err := etcdx.CheckEndpoints(opts.Endpoints, opts.TLS); err != nil {
		return nil, fmt.Errorf("convstate: %w", err)
	}
	e := &Etcd{
		records:     records{db: db, fault: opts.Fault},
		keys:        opts.Prefix,
		timeout:     opts.RequestTimeout,
		ttl:         opts.TTL,
		deferredTTL: opts.DeferredTTL,
		convTTL:     opts.ConversationTTL,
		max:         opts.MaxConversations,
		now:         opts.Now,
	}
	if e.keys == "" {
		e.keys = etcdx.DefaultPrefix
	}
	e.keys += "verdictd/"
	if e.timeout <= 0 {
		e.timeout = etcdx.DefaultRequestTimeout
	}
	if e.ttl <= 0 {
		e.ttl = DefaultTTL
	}
	if e.convTTL <= 0 {
		e.convTTL = e.ttl
	}
	if e.now == nil {
		e.now = time.Now
	}
	cli, err := etcdx.Client(ctx, etcdx.Conn{Endpoints: opts.Endpoints, TLS: opts.TLS, Username: opts.Username,
		Password: opts.Password, DialTimeout: opts.DialTimeout})
	if err != nil {
		return nil, fmt.Errorf("convstate: %w", err)
	}
	e.cli = cli
	// A bucket of one TTL is over once a later one of that TTL is in use.
	e.leases = etcdx.NewLeases(cli, e.timeout, func(fresh, cached leaseKey) bool {
		return cached.ttl == fresh.ttl && cached.bucket < fresh.bucket
	})
	return e, nil
}

// Close closes the connection; every later read or commit fails with ErrUnavailable.
// The keys stay in etcd.
func (e *Etcd) Close() error {
	return etcdx.Close(e.cli, &e.closed, "convstate: etcd")
}

// Key kinds under Prefix + "verdictd/". Names are hashed: keys have a fixed length whatever a
// caller sends, and hold no principal or action text an operator listing keys would read.
const (
	kindConversation = "conv"
	kindQuestion     = "question"
	kindDeferred     = "deferred"
	kindVerdict      = "verdict"
	kindPrior        = "prior"
	kindUses         = "uses" // deferred record id → Uses
	// kindLive marks a live conversation under its principal, for counting: key
	// kindLive/sha256(principal)/sha256(conversation key), on the conversation's lease.
	kindLive = "live"
)

// liveKey is the key marking conversation c live under its principal's prefix.
func (e *Etcd) liveKey(c gates.Conversation) string {
	return e.livePrefix(c.Principal) + e.key("", string(convKey(c)))[len(e.keys)+1:]
}

// livePrefix is the prefix of every live-conversation key of principal p.
func (e *Etcd) livePrefix(p string) string {
	return e.key(kindLive, p) + "/"
}

// Admit counts the principal's live conversations when c is not one of them. The count and
// the commit that starts c are not one transaction: concurrent first preflights of one
// principal's new conversations, on any replicas, can each pass the count, so a principal may
// exceed the bound by at most the number of such preflights in flight at once. A count etcd
// does not answer refuses the preflight (503).
func (e *Etcd) Admit(ctx context.Context, c gates.Conversation) error {
	if e.max <= 0 {
		return nil
	}
	// One round trip; the principal's marks are counted only when c is not live.
	answer, err := e.do(ctx, "read", clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(e.key(kindConversation, string(convKey(c)))), ">", 0)},
		nil,
		[]clientv3.Op{clientv3.OpGet(e.livePrefix(c.Principal), clientv3.WithPrefix(), clientv3.WithCountOnly())}))
	if err != nil {
		return err
	}
	resp := answer.Txn()
	if resp.Succeeded {
		return nil
	}
	if len(resp.Responses) != 1 {
		return e.unavailable("read", fmt.Errorf("%d answers to 1 read", len(resp.Responses)))
	}
	if resp.Responses[0].GetResponseRange().GetCount() >= int64(e.max) {
		return ErrConversationLimit
	}
	return nil
}

// key is the etcd key of name (a conversation key, question id, action key or verdict id) of
// the given kind.
func (e *Etcd) key(kind, name string) string {
	sum := sha256.Sum256([]byte(name))
	return e.keys + kind + "/" + hex.EncodeToString(sum[:])
}

func (e *Etcd) unavailable(op string, err error) error {
	return &UnavailableError{Op: op, Err: err}
}

var errStateClosed = errors.New("state store closed")

// do sends o as one request of op, bounded by the request timeout.
func (e *Etcd) do(ctx context.Context, op string, o clientv3.Op) (clientv3.OpResponse, error) {
	if e.closed.Load() {
		return clientv3.OpResponse{}, e.unavailable(op, errStateClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.cli.Do(ctx, o)
	if err != nil {
		return clientv3.OpResponse{}, e.unavailable(op, err)
	}
	return resp, nil
}

// get reads one key; a missing key is (nil, 0, nil). rev is the key's mod revision.
func (e *Etcd) get(ctx context.Context, op, key string) ([]byte, int64, error) {
	resp, err := e.do(ctx, op, clientv3.OpGet(key))
	if err != nil || len(resp.Get().Kvs) == 0 {
		return nil, 0, err
	}
	kv := resp.Get().Kvs[0]
	return kv.Value, kv.ModRevision, nil
}

// getJSON reads the value of key into a new T; a missing key is nil. A value that does not
// decode is malformed, and the error says what it was.
func getJSON[T any](ctx context.Context, e *Etcd, op, key, what string) (*T, error) {
	b, _, err := e.get(ctx, op, key)
	if err != nil || b == nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("convstate: %s: malformed value: %v", what, err)
	}
	return v, nil
}

// readAll reads ops in one transaction, which answers each of them.
func (e *Etcd) readAll(ctx context.Context, op string, ops []clientv3.Op) ([]*etcdserverpb.ResponseOp, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, e.unavailable(op, err)
	}
	if len(resp.Responses) != len(ops) {
		return nil, e.unavailable(op, fmt.Errorf("%d answers to %d reads", len(resp.Responses), len(ops)))
	}
	return resp.Responses, nil
}

// leaseGranularity is the width of the time buckets whose writes share a lease: a key lives at
// least ttl after its last write and at most one bucket (and a second) more.
func leaseGranularity(ttl time.Duration) time.Duration {
	return max(ttl/24, time.Second)
}

// lease returns the lease for writes of ttl made now, granting it if no write of this bucket
// has. Its TTL is ttl plus one bucket, counted from the grant, so it outlives by ttl every write
// of the bucket whenever the grant reached the cluster.
func (e *Etcd) lease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, leaseKey, error) {
	g := leaseGranularity(ttl)
	k := leaseKey{ttl: ttl, bucket: e.now().UnixNano() / int64(g)}
	id, err := e.leases.Get(ctx, k, int64((ttl+g+time.Second-1)/time.Second))
	return id, k, err
}

// txn is one transaction under construction: the compares of what a run read, and its writes
// with the lease TTL each one needs (zero for none).
type txn struct {
	cmps []clientv3.Cmp
	ops  []pendingOp
	// els are read when a compare fails, and failed tells from them which did (nil:
	// ErrConflict).
	els    []clientv3.Op
	failed func(*clientv3.TxnResponse) error
}

type pendingOp struct {
	key, val string
	ttl      time.Duration // 0: no lease
	del      bool
}

func (t *txn) put(key string, val []byte, ttl time.Duration) {
	t.ops = append(t.ops, pendingOp{key: key, val: string(val), ttl: ttl})
}

// commit runs t. A lease the cluster no longer knows (its data lost, or revoked by an
// operator) is forgotten and the transaction tried once more with a fresh one.
func (e *Etcd) commit(ctx context.Context, op string, t *txn) error {
	if len(t.ops) == 0 {
		return nil
	}
	if e.closed.Load() {
		return e.unavailable(op, errStateClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		type used struct {
			k  leaseKey
			id clientv3.LeaseID
		}
		leases := map[time.Duration]used{}
		ops := make([]clientv3.Op, 0, len(t.ops))
		for _, p := range t.ops {
			switch {
			case p.del:
				ops = append(ops, clientv3.OpDelete(p.key))
			case p.ttl == 0:
				ops = append(ops, clientv3.OpPut(p.key, p.val))
			default:
				id, k, err := e.lease(ctx, p.ttl)
				if err != nil {
					return e.unavailable(op, fmt.Errorf("grant lease: %w", err))
				}
				leases[p.ttl] = used{k, id}
				ops = append(ops, clientv3.OpPut(p.key, p.val, clientv3.WithLease(id)))
			}
		}
		resp, err := e.cli.Txn(ctx).If(t.cmps...).Then(ops...).Else(t.els...).Commit()
		if err != nil {
			for _, u := range leases {
				e.leases.Forget(u.k, u.id)
			}
			// The client returns etcd's typed error for a lease that expired, which compares
			// equal to rpctypes'.
			if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
				continue
			}
			return e.unavailable(op, err)
		}
		switch {
		case resp.Succeeded:
			return nil
		case t.failed != nil:
			return t.failed(resp)
		}
		return ErrConflict
	}
}

// convDoc is the value of a conversation's key.
type convDoc struct {
	Principal    string `json:"principal"`
	Conversation string `json:"conversation_id,omitempty"`
	Intent       int    `json:"intent,omitempty"`
	Tool         int    `json:"tool,omitempty"`
	// Asks are the value ask counts: action key → slot id → count.
	Asks map[string]map[string]int `json:"asks,omitempty"`
}

func (d *convDoc) empty() bool { return d.Intent == 0 && d.Tool == 0 && len(d.Asks) == 0 }

// deferredDoc is the stored intent of a deferred action key: what a trigger run needs of the
// deferred record, on whichever replica it arrives.
type deferredDoc struct {
	RecordID       string              `json:"record_id"`
	ActionKey      string              `json:"action_key"`
	Principal      string              `json:"principal"`
	ConversationID string              `json:"conversation_id,omitempty"`
	Server         string              `json:"server"`
	Tool           string              `json:"tool"`
	Intent         *api.DeferredIntent `json:"deferred_input"`
}

// Deferred returns the stored intent of the latest deferred run of actionKey as a deferred
// record, or nil when there is none (or it expired).
func (e *Etcd) Deferred(ctx context.Context, actionKey string) (*api.Record, error) {
	b, _, err := e.get(ctx, "deferred", e.key(kindDeferred, actionKey))
	if err != nil || b == nil {
		return nil, err
	}
	var d deferredDoc
	if err := apijson.Unmarshal(b, &d); err != nil || d.Intent == nil {
		return nil, fmt.Errorf("convstate: deferred intent of %q: malformed value", actionKey)
	}
	if d.ActionKey != actionKey {
		return nil, nil
	}
	key := d.ActionKey
	return &api.Record{
		RecordID: d.RecordID, ActionKey: &key, Principal: d.Principal, ConversationID: d.ConversationID,
		Server: d.Server, Tool: d.Tool, Outcome: api.OutcomeDeferred, Deferred: d.Intent,
	}, nil
}

// Verdict returns the summary of verdict id jti that the replica issuing it stored, or nil.
func (e *Etcd) Verdict(ctx context.Context, jti string) (*Verdict, error) {
	return getJSON[Verdict](ctx, e, "receipt", e.key(kindVerdict, jti), "verdict summary")
}

// maxPriorAttempts bounds the optimistic retries of a baseline update that other receipts of
// the same action key keep overtaking.
const maxPriorAttempts = 8

// SetBaseline makes next the executed baseline of actionKey if it is newer than the stored one.
func (e *Etcd) SetBaseline(ctx context.Context, actionKey string, next Baseline) (BaselineResult, error) {
	key := e.key(kindPrior, actionKey)
	val, err := json.Marshal(next)
	if err != nil {
		return 0, err
	}
	for range maxPriorAttempts {
		b, rev, err := e.get(ctx, "receipt", key)
		if err != nil {
			return 0, err
		}
		var cur *Baseline
		if b != nil {
			cur = new(Baseline)
			if json.Unmarshal(b, cur) != nil {
				cur = nil // an unreadable value is replaced
			}
		}
		if res := compareBaseline(&next, cur); res != BaselineApplied {
			return res, nil
		}
		t := &txn{cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}}
		t.put(key, val, 0)
		switch err := e.commit(ctx, "receipt", t); {
		case err == nil:
			return BaselineApplied, nil
		case !errors.Is(err, ErrConflict):
			return 0, err
		}
	}
	return 0, e.unavailable("receipt", errors.New("the action key's baseline kept changing"))
}

func (d *Baseline) value(field string) (any, bool, error) {
	raw, ok := d.Values[field]
	if !ok {
		return nil, false, nil
	}
	var v any
	if err := apijson.Unmarshal(raw, &v); err != nil {
		return nil, false, fmt.Errorf("convstate: prior value: malformed value: %v", err)
	}
	return v, true, nil
}

// Begin returns a fresh run over e.
func (e *Etcd) Begin() Run {
	return &etcdRun{st: e, convs: map[gates.Conversation]*convEntry{}, seen: map[string]*storedBinding{},
		prior: map[string]*Baseline{}, uses: map[string]usesEntry{}, runWrites: newRunWrites()}
}

// etcdRun is the gates.State of one run on the etcd state: reads go to etcd (once per key),
// writes stay in memory until Commit sends them in one transaction.
type etcdRun struct {
	st    *Etcd
	convs map[gates.Conversation]*convEntry
	seen  map[string]*storedBinding // read by this run; nil for absent
	prior map[string]*Baseline      // by action key; nil for absent
	uses  map[string]usesEntry      // by deferred record id, as read
	runWrites
}

// usesEntry is the uses of a deferred record as a run read them, with the key's revision.
type usesEntry struct {
	uses Uses
	rev  int64 // 0 when absent
}

func (r *etcdRun) Uses(ctx context.Context, recordID string) (Uses, error) {
	if ue, ok := r.uses[recordID]; ok {
		return ue.uses, nil
	}
	b, rev, err := r.st.get(ctx, "read", r.st.key(kindUses, recordID))
	if err != nil {
		return Uses{}, err
	}
	var u Uses
	if b != nil {
		if err := json.Unmarshal(b, &u); err != nil || u.Count < 0 {
			return Uses{}, fmt.Errorf("convstate: deferred uses: malformed value")
		}
	}
	r.uses[recordID] = usesEntry{u, rev}
	return u, nil
}

// convEntry is one conversation as this run sees it.
type convEntry struct {
	loaded bool  // read from etcd (not only reset by this run)
	rev    int64 // the key's mod revision when read; 0 when absent
	doc    convDoc
	dirty  bool
}

func (r *etcdRun) conv(ctx context.Context, c gates.Conversation) (*convEntry, error) {
	if ce, ok := r.convs[c]; ok {
		return ce, nil
	}
	b, rev, err := r.st.get(ctx, "read", r.st.key(kindConversation, string(convKey(c))))
	if err != nil {
		return nil, err
	}
	ce := &convEntry{loaded: true, rev: rev, doc: convDoc{Principal: c.Principal, Conversation: c.ID}}
	if b != nil {
		var d convDoc
		if err := json.Unmarshal(b, &d); err != nil || d.Intent < 0 || d.Tool < 0 {
			return nil, fmt.Errorf("convstate: conversation counters: malformed value")
		}
		ce.doc = d
	}
	r.convs[c] = ce
	return ce, nil
}

func (r *etcdRun) Gate1Counts(ctx context.Context, c gates.Conversation) (gates.Gate1Counts, error) {
	ce, err := r.conv(ctx, c)
	if err != nil {
		return gates.Gate1Counts{}, err
	}
	return gates.Gate1Counts{Intent: ce.doc.Intent, Tool: ce.doc.Tool}, nil
}

func (r *etcdRun) SetGate1Counts(ctx context.Context, c gates.Conversation, n gates.Gate1Counts) error {
	if n.Intent < 0 || n.Tool < 0 {
		return errors.New("negative ask counter")
	}
	ce, err := r.conv(ctx, c)
	if err != nil {
		return err
	}
	ce.doc.Intent, ce.doc.Tool, ce.dirty = n.Intent, n.Tool, true
	return nil
}

func (r *etcdRun) SlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string) (int, error) {
	ce, err := r.conv(ctx, c)
	if err != nil {
		return 0, err
	}
	return ce.doc.Asks[actionKey][slotID], nil
}

func (r *etcdRun) SetSlotAsks(ctx context.Context, c gates.Conversation, actionKey, slotID string, n int) error {
	if n < 0 {
		return errors.New("negative ask count")
	}
	ce, err := r.conv(ctx, c)
	if err != nil {
		return err
	}
	if ce.doc.Asks == nil {
		ce.doc.Asks = map[string]map[string]int{}
	}
	if ce.doc.Asks[actionKey] == nil {
		ce.doc.Asks[actionKey] = map[string]int{}
	}
	ce.doc.Asks[actionKey][slotID] = n
	ce.dirty = true
	return nil
}

// ResetConversation clears the conversation without reading it: a reset replaces whatever
// another replica wrote meanwhile, so it needs no compare.
func (r *etcdRun) ResetConversation(_ context.Context, c gates.Conversation) error {
	ce, ok := r.convs[c]
	if !ok {
		ce = &convEntry{}
		r.convs[c] = ce
	}
	ce.doc = convDoc{Principal: c.Principal, Conversation: c.ID}
	ce.dirty = true
	return nil
}

func (r *etcdRun) Question(ctx context.Context, id string) (gates.QuestionBinding, bool, error) {
	sb, ok := r.questions[id]
	if !ok {
		p, seen := r.seen[id]
		if !seen {
			b, _, err := r.st.get(ctx, "read", r.st.key(kindQuestion, id))
			if err != nil {
				return gates.QuestionBinding{}, false, err
			}
			if b != nil {
				p = new(storedBinding)
				if err := apijson.Unmarshal(b, p); err != nil {
					return gates.QuestionBinding{}, false, fmt.Errorf("convstate: question binding: malformed value")
				}
			}
			r.seen[id] = p
		}
		if p == nil {
			return gates.QuestionBinding{}, false, nil
		}
		sb = *p
	}
	return gates.QuestionBinding(sb), true, nil
}

// prefetchBatch is how many question ids one read transaction fetches; etcd refuses a
// transaction of more than --max-txn-ops operations (128 by default).
const prefetchBatch = 64

// Prefetch reads the binding of every question id req answers, in batched read transactions:
// a request carrying many answers costs a few round trips, not one per answer.
func (r *etcdRun) Prefetch(ctx context.Context, req *api.Request) error {
	var ids []string
	for _, a := range req.UserAnswers {
		if _, ok := r.seen[a.QuestionID]; ok || slices.Contains(ids, a.QuestionID) {
			continue
		}
		ids = append(ids, a.QuestionID)
	}
	if len(ids) == 0 {
		return nil
	}
	if r.st.closed.Load() {
		return r.st.unavailable("read", errStateClosed)
	}
	for batch := range slices.Chunk(ids, prefetchBatch) {
		ops := make([]clientv3.Op, len(batch))
		for i, id := range batch {
			ops[i] = clientv3.OpGet(r.st.key(kindQuestion, id))
		}
		answers, err := r.st.readAll(ctx, "read", ops)
		if err != nil {
			return err
		}
		for i, id := range batch {
			var p *storedBinding
			if kvs := answers[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				p = new(storedBinding)
				if err := apijson.Unmarshal(kvs[0].Value, p); err != nil {
					return fmt.Errorf("convstate: question binding: malformed value")
				}
			}
			r.seen[id] = p
		}
	}
	return nil
}

func (r *etcdRun) PriorValue(ctx context.Context, actionKey, field string) (any, bool, error) {
	d, ok := r.prior[actionKey]
	if !ok {
		var err error
		if d, err = getJSON[Baseline](ctx, r.st, "read", r.st.key(kindPrior, actionKey), "prior state"); err != nil {
			return nil, false, err
		}
		r.prior[actionKey] = d
	}
	if d == nil {
		return nil, false, nil
	}
	return d.value(field)
}

// Commit sends the run's changes and w's approval to etcd in one transaction, then writes w's
// record in one transaction of the replica's file.
func (r *etcdRun) Commit(ctx context.Context, w *Write) error {
	local := *w
	local.Approval = nil // in etcd, with the state: every replica reads it there
	return r.st.commitWrite(ctx, &local, func(ctx context.Context) error { return r.send(ctx, w) }, nil)
}

// send sends the run's changes in one transaction: the conversations it changed, the
// questions it issued, the intent of a deferred record, the summary of an issued verdict, and
// the approval its record creates or uses — provided no conversation it read, nor the
// approval, has changed since. A changed conversation is ErrConflict
// (decide again); any other failure is a *UnavailableError.
func (r *etcdRun) send(ctx context.Context, w *Write) error {
	rec := w.Record
	st := r.st
	t := &txn{}
	for c, ce := range r.convs {
		key := st.key(kindConversation, string(convKey(c)))
		if ce.loaded {
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", ce.rev))
		}
		switch {
		case !ce.dirty:
		case ce.doc.empty():
			t.ops = append(t.ops, pendingOp{key: key, del: true}, pendingOp{key: st.liveKey(c), del: true})
		default:
			v, err := json.Marshal(ce.doc)
			if err != nil {
				return err
			}
			// The conversation and its mark under the principal share a lease: they expire
			// together, and the count of live conversations falls with them.
			t.put(key, v, st.convTTL)
			t.put(st.liveKey(c), nil, st.convTTL)
		}
	}
	// Questions this run issued live for the TTL. The answers a deferred intent stores are
	// checked again at trigger time, which may come long after: their bindings are written
	// again to live as long as the intent.
	bindings := map[string]storedBinding{}
	ttls := map[string]time.Duration{}
	for id, b := range r.questions {
		bindings[id], ttls[id] = b, st.ttl
	}
	deferred := rec.Outcome == api.OutcomeDeferred && rec.ActionKey != nil && rec.Deferred != nil
	if deferred {
		for _, a := range rec.Deferred.UserAnswers {
			b, ok := r.questions[a.QuestionID]
			if p := r.seen[a.QuestionID]; !ok && p != nil {
				b, ok = *p, true
			}
			if !ok {
				continue
			}
			bindings[a.QuestionID] = b
			if st.deferredTTL == 0 {
				ttls[a.QuestionID] = 0
			} else {
				ttls[a.QuestionID] = max(st.ttl, st.deferredTTL)
			}
		}
	}
	for id, b := range bindings {
		v, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("question binding: %w", err)
		}
		t.put(st.key(kindQuestion, id), v, ttls[id])
	}
	if deferred {
		v, err := json.Marshal(deferredDoc{RecordID: rec.RecordID, ActionKey: *rec.ActionKey, Principal: rec.Principal,
			ConversationID: rec.ConversationID, Server: rec.Server, Tool: rec.Tool, Intent: rec.Deferred})
		if err != nil {
			return fmt.Errorf("deferred intent: %w", err)
		}
		t.put(st.key(kindDeferred, *rec.ActionKey), v, st.deferredTTL)
	}
	if c := r.consumed; c != nil {
		// Every replica's trigger of this record compares the same key: of concurrent triggers,
		// one commits its verdict and the others decide again on the new uses.
		ue, ok := r.uses[c.recordID]
		if !ok {
			return fmt.Errorf("convstate: consume of deferred record %s that the run did not read", c.recordID)
		}
		key := st.key(kindUses, c.recordID)
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", ue.rev))
		v, err := json.Marshal(c.uses)
		if err != nil {
			return fmt.Errorf("deferred uses: %w", err)
		}
		// The uses live as long as the intent they count could be triggered.
		t.put(key, v, st.deferredTTL)
	}
	if rec.VerdictID != nil && rec.Verdict != nil {
		sum, _, err := verdictOf(rec.RecordID, w.Stored)
		if err != nil {
			return fmt.Errorf("verdict summary: %w", err)
		}
		sum.Audience = w.Audience
		v, err := json.Marshal(sum)
		if err != nil {
			return fmt.Errorf("verdict summary: %w", err)
		}
		t.put(st.key(kindVerdict, *rec.VerdictID), v, st.ttl)
	}
	if w.Approval != nil {
		// The approval the record creates or uses, compared as the run read it: a decision
		// another replica made meanwhile fails the commit with ErrApprovalChanged.
		if err := st.approvalWrite(ctx, "commit", t, w.Approval); err != nil {
			return err
		}
	}
	return st.commit(ctx, "commit", t)
}
