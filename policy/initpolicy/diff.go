package initpolicy

import (
	"fmt"
	"slices"
	"strings"
)

// contextLines is the number of unchanged lines shown around each change.
const contextLines = 3

// maxCells bounds the table a diff is computed in (2 bytes a cell). Past it, the part of the two
// texts between their common first and last lines is shown as replaced whole: still a correct
// diff, only not the shortest.
const maxCells = 1 << 23

// Diff returns the unified diff that turns a, the text of the file named aName, into b, named
// bName, with three lines of context; "" when the two are equal. A last line without its
// newline is marked as diff(1) marks it.
func Diff(aName string, a []byte, bName string, b []byte) string {
	x, y := lines(string(a)), lines(string(b))
	ops := script(x, y)
	if len(ops) == 0 {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for len(ops) > 0 {
		// A hunk runs from the first change to the last one within 2*contextLines equal lines of the
		// one before.
		end := 1
		for end < len(ops) && ops[end].i-ops[end-1].iEnd() <= 2*contextLines {
			end++
		}
		hunk(&out, x, y, ops[:end])
		ops = ops[end:]
	}
	return out.String()
}

// edit replaces x[i:i+del] by y[j:j+ins].
type edit struct{ i, del, j, ins int }

func (e edit) iEnd() int { return e.i + e.del }

// hunk writes the hunk of edits es, with their contextLines.
func hunk(out *strings.Builder, x, y []string, es []edit) {
	first, last := es[0], es[len(es)-1]
	i0 := max(first.i-contextLines, 0)
	j0 := first.j - (first.i - i0)
	i1 := min(last.iEnd()+contextLines, len(x))
	j1 := last.j + last.ins + (i1 - last.iEnd())
	fmt.Fprintf(out, "@@ -%s +%s @@\n", span(i0, i1-i0), span(j0, j1-j0))
	i := i0
	for _, e := range es {
		for ; i < e.i; i++ {
			write(out, ' ', x[i])
		}
		for k := range e.del {
			write(out, '-', x[e.i+k])
		}
		for k := range e.ins {
			write(out, '+', y[e.j+k])
		}
		i = e.iEnd()
	}
	for ; i < i1; i++ {
		write(out, ' ', x[i])
	}
}

// span is a hunk's range: its first line (1-based; the line before it when it is empty) and
// its count, the count left out when it is 1.
func span(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func write(out *strings.Builder, mark byte, line string) {
	out.WriteByte(mark)
	out.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}

// lines splits s after each newline; a last line without one is kept as it is, so that it
// differs from the same line with one.
func lines(s string) []string { return slices.Collect(strings.Lines(s)) }

// script returns the edits that turn x into y, in order: a longest common subsequence of the
// lines between their common prefix and suffix, or, when that part is too large to compare
// line by line, all of it replaced.
func script(x, y []string) []edit {
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	n, m := len(mx), len(my)
	if n == 0 && m == 0 {
		return nil
	}
	if n == 0 || m == 0 || (n+1)*(m+1) > maxCells || n >= 1<<16 || m >= 1<<16 {
		return []edit{{i: pre, del: n, j: pre, ins: m}}
	}
	// lcs[i][j] is the length of a longest common subsequence of mx[i:] and my[j:].
	w := m + 1
	lcs := make([]uint16, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if mx[i] == my[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var es []edit
	// add deletes x's line i or inserts y's line j, growing the last edit when it ends there.
	add := func(i, j int, del bool) {
		if n := len(es); n == 0 || es[n-1].iEnd() != i || es[n-1].j+es[n-1].ins != j {
			es = append(es, edit{i: i, j: j})
		}
		if e := &es[len(es)-1]; del {
			e.del++
		} else {
			e.ins++
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && mx[i] == my[j]:
			i, j = i+1, j+1
		case j == m || (i < n && lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			add(pre+i, pre+j, true)
			i++
		default:
			add(pre+i, pre+j, false)
			j++
		}
	}
	return es
}
