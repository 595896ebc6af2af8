package release

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apacheLicenseSHA256 is the digest of the Apache License 2.0's text as the Apache Software
// Foundation publishes it (LICENSE-2.0.txt), which is also Debian's
// /usr/share/common-licenses/Apache-2.0: the LICENSE at the root must be that text, verbatim.
const apacheLicenseSHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestLicenseFiles checks the licence at the module's root: LICENSE is the Apache License 2.0
// verbatim, and NOTICE names the project and its licence. The packages' copyright files and
// the images' licenses label are checked with the release's artifacts (TestDebContents,
// TestImages).
func TestLicenseFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(lic); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 verbatim: sha256 %x, want %s", sum, apacheLicenseSHA256)
	}
	if License != "Apache-2.0" {
		t.Errorf("License = %q, but LICENSE holds Apache-2.0", License)
	}
	notice, err := os.ReadFile(filepath.Join(root, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verdict", "Copyright", "Apache License, Version 2.0"} {
		if !strings.Contains(string(notice), want) {
			t.Errorf("NOTICE does not say %q", want)
		}
	}
	if common, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0"); err == nil && string(common) != string(lic) {
		t.Error("LICENSE differs from Debian's /usr/share/common-licenses/Apache-2.0, which the packages' copyright file points at")
	}
}
