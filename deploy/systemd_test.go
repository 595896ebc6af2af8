package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// units are the shipped units and the binary each one runs.
var units = []struct {
	file, binary string
	credentials  []string // the names of its LoadCredential= entries
}{
	{"verdictd.service", "verdictd", []string{"signing.jwk"}},
	{"verdict-executor.service", "verdict-executor", []string{"receipt.jwk", "verdictd.token"}},
	{"mcpgate.service", "mcpgate", []string{"mcpgate.yaml", "state.key"}},
	{"verdict-console.service", "verdict-console", []string{"client.secret", "verdictd.token", "executor.token"}},
}

// maxExposure is the highest `systemd-analyze security` exposure a unit may have: 2.0 is the
// top of systemd's "OK" band.
const maxExposure = 2.0

// directives reads a unit's Key=Value lines, every value of a key in order.
func directives(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("systemd", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a Key=Value line: %q", file, line)
		}
		d[k] = append(d[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestUnitsHardening checks the settings every unit must have, whatever systemd-analyze's
// scoring makes of them: a wrong one here is a weaker sandbox, not a lower score.
func TestUnitsHardening(t *testing.T) {
	required := map[string]string{
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"RestrictSUIDSGID":        "yes",
		"UMask":                   "0077",
		"SystemCallArchitectures": "native",
	}
	for _, u := range units {
		t.Run(u.file, func(t *testing.T) {
			d := directives(t, u.file)
			for k, want := range required {
				if got := d[k]; len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want exactly %q", k, got, want)
				}
			}
			if got := d["SystemCallFilter"]; len(got) == 0 || got[0] != "@system-service" {
				t.Errorf("SystemCallFilter = %q, want @system-service first", got)
			}
			if got := d["User"]; len(got) != 1 || got[0] != strings.TrimSuffix(u.file, ".service") {
				t.Errorf("User = %q, want the unit's own system user", got)
			}
			if got := d["ExecStart"]; len(got) != 1 || !strings.HasPrefix(got[0], "/usr/bin/"+u.binary+" serve ") {
				t.Errorf("ExecStart = %q, want /usr/bin/%s serve …", got, u.binary)
			}
			var creds []string
			for _, c := range d["LoadCredential"] {
				name, path, _ := strings.Cut(c, ":")
				if !strings.HasPrefix(path, "/etc/verdict/") {
					t.Errorf("LoadCredential %q reads outside /etc/verdict/", c)
				}
				creds = append(creds, name)
			}
			if strings.Join(creds, " ") != strings.Join(u.credentials, " ") {
				t.Errorf("LoadCredential names = %q, want %q", creds, u.credentials)
			}
			if got := d["TimeoutStopSec"]; len(got) != 1 {
				t.Errorf("TimeoutStopSec = %q, want one value covering the graceful drain", got)
			}
		})
	}
}

// stubbed writes a copy of a unit into dir whose ExecStart runs a stub executable in dir, so
// that systemd-analyze verify can resolve it on a machine without the package installed.
func stubbed(t *testing.T, dir, file, binary string) string {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join("systemd", file))
	if err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(dir, binary)
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit = bytes.ReplaceAll(unit, []byte("/usr/bin/"+binary+" "), []byte(stub+" "))
	out := filepath.Join(dir, file)
	if err := os.WriteFile(out, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "systemd-analyze", "Debian package systemd; the units are not verified")
}

// TestUnitsVerify runs systemd-analyze verify on every unit, with its binary resolvable.
func TestUnitsVerify(t *testing.T) {
	bin := systemdAnalyze(t)
	for _, u := range units {
		t.Run(u.file, func(t *testing.T) {
			unit := stubbed(t, t.TempDir(), u.file, u.binary)
			out, err := exec.Command(bin, "verify", unit).CombinedOutput()
			if err != nil {
				t.Fatalf("systemd-analyze verify %s: %v\n%s", u.file, err, out)
			}
			// verify also reports on units it loads beside this one; only this unit's lines count.
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, u.file) {
					t.Errorf("systemd-analyze verify: %s", line)
				}
			}
		})
	}
}

var exposureLine = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) (\S+)`)

// TestUnitsSecurity records each unit's `systemd-analyze security --offline=true` exposure: at
// most maxExposure, and at most what docs/deploy.md says of it.
func TestUnitsSecurity(t *testing.T) {
	bin := systemdAnalyze(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		t.Run(u.file, func(t *testing.T) {
			unit := stubbed(t, t.TempDir(), u.file, u.binary)
			// The exit status says whether the exposure passed --threshold (default 100); the
			// number is read from the output.
			out, _ := exec.Command(bin, "security", "--offline=true", "--no-pager", unit).CombinedOutput()
			m := exposureLine.FindSubmatch(out)
			if m == nil {
				t.Fatalf("systemd-analyze security printed no exposure:\n%s", out)
			}
			exposure, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: exposure %.1f %s", u.file, exposure, m[2])
			if exposure > maxExposure {
				t.Errorf("%s: exposure %.1f, want at most %.1f (\"OK\"):\n%s", u.file, exposure, maxExposure, out)
			}
			documented := regexp.MustCompile("\\| `" + regexp.QuoteMeta(u.file) + "` \\| ([0-9.]+) ").FindSubmatch(doc)
			if documented == nil {
				t.Fatalf("docs/deploy.md lists no exposure for %s", u.file)
			}
			if d, _ := strconv.ParseFloat(string(documented[1]), 64); exposure > d {
				t.Errorf("%s: exposure %.1f, docs/deploy.md says %s", u.file, exposure, documented[1])
			}
		})
	}
}
