package mcpgate

import (
	"errors"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/waiting"
)

func TestStateConfigValidate(t *testing.T) {
	etcd := func(s StateConfig) StateConfig {
		s.Kind = StateStoreEtcd
		s.Endpoints = []string{"http://127.0.0.1:2379"}
		return s
	}
	tests := []struct {
		name string
		s    StateConfig
		want []string
	}{
		{"defaults", StateConfig{}, nil},
		{"memory named", StateConfig{Kind: StateStoreMemory}, nil},
		{"etcd", etcd(StateConfig{}), nil},
		{"etcd without endpoints", StateConfig{Kind: StateStoreEtcd}, []string{"state: etcd: at least one endpoint is required"}},
		{"etcd keys on memory", func() StateConfig {
			s := StateConfig{Kind: StateStoreMemory}
			s.Endpoints = []string{"http://127.0.0.1:2379"}
			return s
		}(), []string{"state: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd"}},
		{"misspelt kind", StateConfig{Kind: "etdc"}, []string{`state.kind "etdc": want memory or etcd`}},
		{"negative", StateConfig{CallBurst: -1}, []string{"state.call_burst must not be negative"}},
		{"a principal's share over half the count", StateConfig{MaxPending: 20, PrincipalPending: 11},
			[]string{"state.principal_pending 11 is more than half of max_pending 20: one principal could make every other call busy"}},
		{"a principal's share over half the bytes", StateConfig{PrincipalBytes: 200 << 20},
			[]string{"state.principal_bytes 209715200 is more than half of max_bytes 268435456: one principal could make every other call busy"}},
		{"a share no call fits in", StateConfig{PrincipalBytes: 1000},
			[]string{"state.principal_bytes 1000 is under 65536: no call would fit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range tt.s.validate() {
				got = append(got, err.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("validate = %q\nwant       %q", got, tt.want)
			}
		})
	}
}

// TestDefaultsKeepOnePrincipalFromTheRest is the arithmetic of docs/gateway.md: at
// the defaults, even several principals flooding together leave room for everyone else.
func TestDefaultsKeepOnePrincipalFromTheRest(t *testing.T) {
	l := (&StateConfig{}).limits()
	if n := l.MaxPending / l.PrincipalPending; n != 625 {
		t.Errorf("%d principals at their count share fill the store, documented 625", n)
	}
	if n := l.MaxBytes / l.PrincipalBytes; n != 32 {
		t.Errorf("%d principals at their byte share fill the store, documented 32", n)
	}
}

func TestHeldCalls(t *testing.T) {
	lim := waiting.Limits{MaxPending: 3, MaxBytes: 1000, PrincipalPending: 2, PrincipalBytes: 400}
	h := newHeldCalls()
	r1, err := h.hold("a", 300, lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.hold("a", 101, lim); !errors.Is(err, waiting.ErrBusyPrincipal) {
		t.Fatalf("over the principal's bytes: %v", err)
	}
	if _, err := h.hold("a", 401, lim); !errors.Is(err, waiting.ErrStateTooLarge) {
		t.Fatalf("larger than a share: %v", err)
	}
	if _, err := h.hold("b", 10, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := h.hold("c", 10, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := h.hold("d", 10, lim); !errors.Is(err, waiting.ErrBusy) {
		t.Fatalf("over the global count: %v", err)
	}
	r1()
	r1() // a second release gives nothing back twice
	if h.all.Count != 2 || h.all.Bytes != 20 || h.mine["a"] != (waiting.Usage{}) {
		t.Fatalf("after release: all %+v, a %+v", h.all, h.mine["a"])
	}
	if _, err := h.hold("a", 400, lim); err != nil {
		t.Fatalf("the released place: %v", err)
	}
}
