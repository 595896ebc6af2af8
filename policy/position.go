package policy

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/internal/yamlpos"
)

// In formats p the way editors and terminals link to a place: file:line:col: path: message, or
// file: path: message when p has no place. Without a file it is "line L:C: " and p.String().
func (p Problem) In(file string) string {
	pos := yamlpos.Pos{Line: p.Line, Column: p.Column}.String()
	var b strings.Builder
	switch {
	case file != "" && pos != "":
		b.WriteString(file + ":" + pos + ": ")
	case file != "":
		b.WriteString(file + ": ")
	case pos != "":
		b.WriteString("line " + pos + ": ")
	}
	b.WriteString(p.String())
	return b.String()
}

// Locate places every problem that has a path and no place yet in the policy document data, for
// problems found outside Parse (such as a server that lists no tool a policy entry names). A
// document that does not parse leaves them unplaced.
func Locate(data []byte, problems []Problem) []Problem {
	root, err := yamlpos.Parse(data)
	if err != nil {
		return problems
	}
	return locate(root, problems)
}

// locate places problems in the document root (see Locate). Paths are in the notation of key
// and index, which yamlpos reads back.
func locate(root *yaml.Node, problems []Problem) []Problem {
	for i, p := range problems {
		if p.Line != 0 || p.Path == "" {
			continue
		}
		pos, _ := yamlpos.Find(root, p.Path)
		problems[i].Line, problems[i].Column = pos.Line, pos.Column
	}
	return problems
}
