package executor

import (
	"crypto/sha256"
	"fmt"

	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/policy"
)

// pinnedPolicy is the policy the executor reads its pins from, with its file's hash: one
// value, swapped whole, so the pins in force and the content they came from never disagree.
type pinnedPolicy struct {
	policy *policy.Policy
	hash   [sha256.Size]byte
}

// pinned returns the policy whose pins are in force: nil without a policy, and a nil
// *policy.Policy pins nothing.
func (s *Service) pinned() *policy.Policy {
	if p := s.pins.Load(); p != nil {
		return p.policy
	}
	return nil
}

// loadPinsFile reads the policy at path for its pins. A policy that does not load stops the
// executor at start; on a later change it keeps the pins in force (see loadPins).
func (s *Service) loadPinsFile(path string) error {
	data, err := opfile.ReadFile(path)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return s.loadPins(data)
}

// loadPins puts the pins of the policy in data in force (see policy.ParsePins). A policy that
// does not parse is refused and the pins in force stay: a broken edit must not drop a pin.
func (s *Service) loadPins(data []byte) error {
	p, err := policy.ParsePins(data)
	if err != nil {
		s.log.Error("policy reload refused; the pins in force stay", "policy", s.cfg.Policy, "error", err.Error())
		return err
	}
	s.pins.Store(&pinnedPolicy{policy: p, hash: sha256.Sum256(data)})
	s.log.Info("pins loaded", "policy", s.cfg.Policy, "version", p.Version, "servers", len(p.Pins))
	return nil
}

func (s *Service) pinsHash() [sha256.Size]byte {
	if p := s.pins.Load(); p != nil {
		return p.hash
	}
	return [sha256.Size]byte{}
}
