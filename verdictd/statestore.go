package verdictd

import (
	"errors"
	"fmt"
	"time"

	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
)

// State store kinds.
const (
	StateStoreBolt = "bbolt"
	StateStoreEtcd = "etcd"
)

// Defaults of the etcd state store: those of every store's etcd keys, and the state's TTL.
const (
	DefaultEtcdPrefix         = etcdx.DefaultPrefix
	DefaultEtcdDialTimeout    = etcdx.DefaultDialTimeout
	DefaultEtcdRequestTimeout = etcdx.DefaultRequestTimeout
	DefaultStateTTL           = convstate.DefaultTTL
)

// StateStore selects where the conversation state lives. Kind bbolt (the default) keeps it in
// the replica's own file, in the commit of each decision record: right for one verdictd. Kind
// etcd keeps it in an etcd cluster shared by every replica of a deployment (same endpoints and
// prefix), so that ask ceilings, question ids, deferred intents and prior state hold whichever
// replica a request reaches. The connection keys are etcdx.Config, read at the section's own
// level as in the executor's nonce_store, so both daemons' etcd blocks can be the same.
// verdictd's keys are under prefix + "verdictd/", beside the executors' prefix + "nonce/"; its
// request_timeout bounds each etcd request of a preflight or receipt, and an etcd that does not
// answer within it fails the request with 503 state_store_unavailable.
type StateStore struct {
	Kind string `json:"kind,omitempty"`
	etcdx.Config
	// TTL is how long a conversation's ask counters, an issued question id and the verdict
	// summary a receipt is checked against live after their last write; default 24h. An answer
	// to a question older than that counts for nothing (unknown_question), and a conversation
	// idle for that long starts its ceilings afresh.
	TTL confx.Duration `json:"ttl,omitempty"`
	// DeferredTTL bounds how long a deferred intent can be triggered after its last deferred
	// run. Zero (the default) keeps it until the action key is deferred again.
	DeferredTTL confx.Duration `json:"deferred_ttl,omitempty"`
}

// EtcdTLS are the PEM files of the connection to etcd: ca verifies the servers (system roots
// when empty); cert and key are verdictd's client certificate, if etcd asks for one.
type EtcdTLS = etcdx.TLS

// validate reports the problems of the state_store section.
func (s *StateStore) validate() []error {
	var errs []error
	switch s.Kind {
	case "", StateStoreBolt:
		// A misspelt kind must not leave a replica counting asks on its own while its operator
		// believes the ceilings hold across replicas.
		if !s.Config.Empty() || s.TTL != 0 || s.DeferredTTL != 0 {
			errs = append(errs, confx.Place("state_store", errors.New("state_store: endpoints, prefix, tls, username, password_file, timeouts and ttls apply only to kind etcd")))
		}
	case StateStoreEtcd:
		errs = append(errs, s.Config.Validate("state_store", "")...)
		if ttl := s.TTL.D(); ttl != 0 && ttl < 2*time.Second {
			errs = append(errs, confx.Place("state_store.ttl", fmt.Errorf("state_store.ttl %s is under 2s: etcd leases count whole seconds", ttl)))
		}
		if d := s.DeferredTTL.D(); d != 0 && d < 2*time.Second {
			errs = append(errs, confx.Place("state_store.deferred_ttl", fmt.Errorf("state_store.deferred_ttl %s is under 2s: etcd leases count whole seconds", d)))
		}
	default:
		errs = append(errs, confx.Place("state_store.kind", fmt.Errorf("state_store.kind %q: want bbolt or etcd", s.Kind)))
	}
	return errs
}

// etcdOptions are the etcd state's options, without the password (read at start).
func (s *StateStore) etcdOptions() convstate.EtcdOptions {
	return convstate.EtcdOptions{
		Endpoints:      s.Endpoints,
		Prefix:         s.Prefix,
		TLS:            s.TLS,
		Username:       s.Username,
		DialTimeout:    s.DialTimeout.D(),
		RequestTimeout: s.RequestTimeout.D(),
		TTL:            s.TTL.D(),
		DeferredTTL:    s.DeferredTTL.D(),
	}
}

// readPassword reads the password file of the etcd user.
func (s *StateStore) readPassword() (string, error) { return s.Config.ReadPassword("state_store") }
