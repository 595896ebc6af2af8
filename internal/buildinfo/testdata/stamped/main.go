// Command stamped prints what buildinfo.Read says of its own build, for TestStampLinked.
package main

import (
	"fmt"

	"github.com/verdictgate/verdict/internal/buildinfo"
)

func main() {
	in := buildinfo.Read()
	fmt.Print(in.Version, " ", in.Revision, " ", in.Modified)
}
