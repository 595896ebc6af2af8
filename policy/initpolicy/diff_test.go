package initpolicy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/policy/initpolicy"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"both empty", "", "", ""},
		{"changed line", "a\nb\nc\n", "a\nB\nc\n", "--- old\n+++ new\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"from nothing", "", "a\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a\n"},
		{"to nothing", "a\n", "", "--- old\n+++ new\n@@ -1 +0,0 @@\n-a\n"},
		{"no newline at end", "a\nb", "a\nb\n", "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"context bounded", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nfive\n6\n7\n8\n",
			"--- old\n+++ new\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"two hunks", "a\n1\n2\n3\n4\n5\n6\n7\nb\n", "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			"--- old\n+++ new\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n"},
		{"one hunk across six equal lines", "a\n1\n2\n3\n4\n5\n6\nb\n", "A\n1\n2\n3\n4\n5\n6\nB\n",
			"--- old\n+++ new\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := initpolicy.Diff("old", []byte(tt.a), "new", []byte(tt.b)); got != tt.want {
				t.Errorf("Diff =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// A diff is a correct patch: applied to the old text it gives the new one.
func TestDiffApplies(t *testing.T) {
	line := rapid.SampledFrom([]string{"a\n", "b\n", "c\n", "tools:\n", "  x: 1\n", "\n"})
	text := rapid.Custom(func(t *rapid.T) string {
		s := strings.Join(rapid.SliceOfN(line, 0, 40).Draw(t, "lines"), "")
		if rapid.Bool().Draw(t, "cut last newline") {
			s = strings.TrimSuffix(s, "\n")
		}
		return s
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := text.Draw(t, "a"), text.Draw(t, "b")
		d := initpolicy.Diff("a", []byte(a), "b", []byte(b))
		if (d == "") != (a == b) {
			t.Fatalf("diff %q of %q and %q", d, a, b)
		}
		got, err := apply(a, d)
		if err != nil || got != b {
			t.Fatalf("applied: %q (%v), want %q\n%s", got, err, b, d)
		}
	})
}

// apply applies the unified diff d to a, checking every context and removed line.
func apply(a, d string) (string, error) {
	if d == "" {
		return a, nil
	}
	var old []string
	for l := range strings.Lines(a) {
		old = append(old, l)
	}
	ls := strings.SplitAfter(d, "\n")
	if len(ls) < 2 || !strings.HasPrefix(ls[0], "--- ") || !strings.HasPrefix(ls[1], "+++ ") {
		return "", fmt.Errorf("no header")
	}
	var out []string
	i := 0 // next line of old
	for k := 2; k < len(ls) && ls[k] != ""; k++ {
		l := ls[k]
		switch l[0] {
		case '@':
			f := strings.Fields(l)
			s, _, _ := strings.Cut(strings.TrimPrefix(f[1], "-"), ",")
			start, err := strconv.Atoi(s)
			if err != nil {
				return "", err
			}
			if !strings.HasSuffix(f[1], ",0") {
				start--
			}
			for ; i < start; i++ {
				out = append(out, old[i])
			}
		case ' ', '-':
			text := l[1:]
			if k+1 < len(ls) && strings.HasPrefix(ls[k+1], "\\ ") {
				text = strings.TrimSuffix(text, "\n")
				k++
			}
			if i >= len(old) || old[i] != text {
				return "", fmt.Errorf("line %d is not %q", i+1, text)
			}
			if l[0] == ' ' {
				out = append(out, text)
			}
			i++
		case '+':
			text := l[1:]
			if k+1 < len(ls) && strings.HasPrefix(ls[k+1], "\\ ") {
				text = strings.TrimSuffix(text, "\n")
				k++
			}
			out = append(out, text)
		default:
			return "", fmt.Errorf("line %q", l)
		}
	}
	out = append(out, old[i:]...)
	return strings.Join(out, ""), nil
}
