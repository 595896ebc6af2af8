package policy

import (
	"os"
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

// BenchmarkParsePins reads the pins of a policy with expressions, as the executor does on
// every change of the file, against Parse, which compiles them.
func BenchmarkParsePins(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "bank.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParsePins", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParsePins(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
