package policy

import (
	"path/filepath"
	"testing"
)

// BenchmarkLoad loads the example policy, as verdictd and mcpgate do at start and on every
// change of the file.
func BenchmarkLoad(b *testing.B) {
	path := filepath.Join("..", "examples", "policy.yaml")
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
