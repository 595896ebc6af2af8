package gates

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"
	"sync"

	"github.com/verdictgate/verdict/api"
)

// Conversation identifies where ask counters are kept: per (principal, conversation id), or per
// principal when the request has no conversation id.
type Conversation struct {
	Principal string
	ID        string
}

// Gate1Counts are the Gate-1 ask counters of a conversation.
type Gate1Counts struct {
	Intent int
	Tool   int
}

// QuestionBinding is what an issued question_id stands for. An answer counts only for the
// action key and slot it was bound to.
type QuestionBinding struct {
	Principal string
	ActionKey string // "" for intent questions, which precede the action key
	SlotID    string
	Kind      string
	// Value is what an approval answer must echo, or the prior-state value offered.
	Value any
	// Shown is what an approval was shown with (the value, or the call's arguments).
	Shown any
	// Origin is prior_state when the question offers an executed value for confirmation.
	Origin  api.Source
	Options [][]string // branch options
}

// State is what verdictd keeps between runs. Implementations must be safe for concurrent use;
// read-modify-write sequences on one conversation are serialized by the caller.
type State interface {
	Gate1Counts(ctx context.Context, c Conversation) (Gate1Counts, error)
	SetGate1Counts(ctx context.Context, c Conversation, n Gate1Counts) error
	// SlotAsks is how often a value or approval slot was asked under an action key.
	SlotAsks(ctx context.Context, c Conversation, actionKey, slotID string) (int, error)
	SetSlotAsks(ctx context.Context, c Conversation, actionKey, slotID string, n int) error
	// ResetConversation clears the Gate-1 counters and the value ask counts (new_request).
	ResetConversation(ctx context.Context, c Conversation) error
	SaveQuestion(ctx context.Context, id string, b QuestionBinding) error
	Question(ctx context.Context, id string) (QuestionBinding, bool, error)
	// PriorValue is a value an executor receipt confirmed was executed under the action key.
	PriorValue(ctx context.Context, actionKey, field string) (any, bool, error)
}

// MemState is an in-memory State.
type MemState struct {
	mu        sync.Mutex
	gate1     map[Conversation]Gate1Counts
	asks      map[Conversation]map[string]int // actionKey + "\x00" + slot
	questions map[string]QuestionBinding
	prior     map[string]map[string]any
}

// NewMemState returns an empty in-memory State.
func NewMemState() *MemState {
	return &MemState{
		gate1:     map[Conversation]Gate1Counts{},
		asks:      map[Conversation]map[string]int{},
		questions: map[string]QuestionBinding{},
		prior:     map[string]map[string]any{},
	}
}

func (m *MemState) Gate1Counts(_ context.Context, c Conversation) (Gate1Counts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gate1[c], nil
}

func (m *MemState) SetGate1Counts(_ context.Context, c Conversation, n Gate1Counts) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate1[c] = n
	return nil
}

func (m *MemState) SlotAsks(_ context.Context, c Conversation, actionKey, slotID string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asks[c][actionKey+"\x00"+slotID], nil
}

func (m *MemState) SetSlotAsks(_ context.Context, c Conversation, actionKey, slotID string, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asks[c] == nil {
		m.asks[c] = map[string]int{}
	}
	m.asks[c][actionKey+"\x00"+slotID] = n
	return nil
}

func (m *MemState) ResetConversation(_ context.Context, c Conversation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.gate1, c)
	delete(m.asks, c)
	return nil
}

func (m *MemState) SaveQuestion(_ context.Context, id string, b QuestionBinding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.questions[id] = b
	return nil
}

func (m *MemState) Question(_ context.Context, id string) (QuestionBinding, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.questions[id]
	return b, ok, nil
}

func (m *MemState) PriorValue(_ context.Context, actionKey, field string) (any, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.prior[actionKey][field]
	return v, ok, nil
}

// SetPrior records executed values under an action key, as an accepted receipt would.
func (m *MemState) SetPrior(actionKey string, values map[string]any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prior[actionKey] = values
}

// IDSource makes record ids ("rec_…") and question ids ("q_…"). Ids are opaque: they never
// carry a tool name or any request content.
type IDSource interface {
	NewID(prefix string) (string, error)
}

// RandomIDs makes ids from 130 random bits.
type RandomIDs struct{}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 26 random base32 characters.
func (RandomIDs) NewID(prefix string) (string, error) {
	var b [17]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:])[:26]), nil
}
