package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

func TestDebVersion(t *testing.T) {
	tests := []struct{ version, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3~rc.1"},
		{"v0.0.0-20261202030405-0123456789ab", "0.0.0~20261202030405-0123456789ab"},
	}
	for _, tt := range tests {
		if got := debVersion(Source{Version: tt.version}); got != tt.want {
			t.Errorf("debVersion(%q) = %q, want %q", tt.version, got, tt.want)
		}
	}
}

func dpkgDeb(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "dpkg-deb", "Debian package dpkg; the packages' contents are not checked")
}

// debEntry is one line of dpkg-deb -c: mode, owner/group, path.
type debEntry struct{ mode, owner string }

func debContents(t *testing.T, dpkg, deb string) map[string]debEntry {
	t.Helper()
	out, err := exec.Command(dpkg, "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v", deb, err)
	}
	entries := map[string]debEntry{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		if path == "" {
			continue
		}
		entries[path] = debEntry{f[0], f[1]}
	}
	return entries
}

// TestDebContents reads each package back with dpkg-deb: its control fields, every file with
// its mode and owner, its conffiles and its maintainer scripts.
func TestDebContents(t *testing.T) {
	dpkg := dpkgDeb(t)
	_, arts := testRelease(t)
	for _, d := range Daemons {
		t.Run(d.Package, func(t *testing.T) {
			deb := artifact(t, arts, "deb", d.Command)
			if got, want := filepath.Base(deb), DebFileName(d, testSource, hostTarget); got != want {
				t.Errorf("package file %s, want %s", got, want)
			}
			fields := map[string]string{
				"Package":      d.Package,
				"Version":      debVersion(testSource),
				"Architecture": hostTarget.Arch,
				"Maintainer":   DefaultMaintainer,
				"Section":      "net",
				"Priority":     "optional",
				"Homepage":     Homepage,
				"Depends":      "passwd",
			}
			for name, want := range fields {
				out, err := exec.Command(dpkg, "-f", deb, name).Output()
				if err != nil {
					t.Fatalf("dpkg-deb -f %s: %v", name, err)
				}
				if got := strings.TrimSpace(string(out)); got != want {
					t.Errorf("control %s = %q, want %q", name, got, want)
				}
			}

			want := map[string]debEntry{
				"/usr/bin/" + d.Binary:                    {"-rwxr-xr-x", "root/root"},
				"/usr/lib/systemd/system/" + d.Unit:       {"-rw-r--r--", "root/root"},
				"/usr/lib/sysusers.d/" + d.User + ".conf": {"-rw-r--r--", "root/root"},
				"/etc/verdict":                            {"drwxr-xr-x", "root/root"},
				"/etc/verdict/" + d.CredentialDir:         {"drwx------", "root/root"},
				DebCopyright(d):                           {"-rw-r--r--", "root/root"},
				DebChangelog(d, testSource):               {"-rw-r--r--", "root/root"},
				DebManPage(d):                             {"-rw-r--r--", "root/root"},
				DebLintianOverrides(d):                    {"-rw-r--r--", "root/root"},
			}
			var conffiles []string
			for _, c := range d.Configs {
				mode := "-rw-r--r--"
				if c.Mode == 0o600 {
					mode = "-rw-------"
				}
				want["/etc/verdict/"+c.Name] = debEntry{mode, "root/root"}
				conffiles = append(conffiles, "/etc/verdict/"+c.Name)
			}
			got := debContents(t, dpkg, deb)
			for path, w := range want {
				g, ok := got[path]
				if !ok {
					t.Errorf("%s is not in the package", path)
					continue
				}
				if g != w {
					t.Errorf("%s is %v, want %v", path, g, w)
				}
			}
			for path, g := range got {
				if _, ok := want[path]; ok {
					continue
				}
				// The parents of what is shipped, and nothing else.
				if !strings.HasPrefix(g.mode, "d") || !isParentOfAny(path, want) {
					t.Errorf("unexpected %s %v in the package", path, g)
				}
			}

			checkDebCopyright(t, dpkg, deb, d)

			ctl := t.TempDir()
			if out, err := exec.Command(dpkg, "-e", deb, ctl).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb -e: %v\n%s", err, out)
			}
			cf, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
			if err != nil {
				t.Fatal(err)
			}
			listed := strings.Fields(string(cf))
			slices.Sort(listed)
			slices.Sort(conffiles)
			if !slices.Equal(listed, conffiles) {
				t.Errorf("conffiles = %q, want %q", listed, conffiles)
			}
			for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
				body, err := os.ReadFile(filepath.Join(ctl, s))
				if err != nil {
					t.Errorf("maintainer script %s: %v", s, err)
					continue
				}
				if sh, err := exec.LookPath("sh"); err == nil {
					if out, err := exec.Command(sh, "-n", filepath.Join(ctl, s)).CombinedOutput(); err != nil {
						t.Errorf("%s does not parse: %v\n%s", s, err, out)
					}
				}
				if s == "preinst" && !strings.Contains(string(body), "useradd --system --user-group") {
					t.Errorf("preinst creates no system user:\n%s", body)
				}
				if strings.Contains(string(body), "systemctl enable") || strings.Contains(string(body), "systemctl start") {
					t.Errorf("%s enables or starts the service at install:\n%s", s, body)
				}
			}
		})
	}
}

// checkDebCopyright unpacks the package and reads its copyright file as Debian's
// machine-readable format (copyright-format 1.0) has it: a header paragraph naming the format,
// a Files: * paragraph under the project's licence, and a stand-alone License paragraph holding
// the licence's text or the path of Debian's copy of it.
func checkDebCopyright(t *testing.T, dpkg, deb string, d Daemon) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(dpkg, "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, DebCopyright(d)))
	if err != nil {
		t.Fatalf("the package has no copyright file: %v", err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "deploy", "debian", "copyright"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not deploy/debian/copyright", DebCopyright(d))
	}
	paras, err := parseDeb822(string(got))
	if err != nil {
		t.Fatalf("%s: %v", DebCopyright(d), err)
	}
	if len(paras) < 3 {
		t.Fatalf("%s has %d paragraphs, want a header, a Files paragraph and a License paragraph", DebCopyright(d), len(paras))
	}
	if f := paras[0]["Format"]; f != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Errorf("Format: %q, want copyright-format 1.0", f)
	}
	var files, text bool
	for _, p := range paras[1:] {
		lic, _, _ := strings.Cut(p["License"], "\n")
		switch {
		case p["Files"] != "":
			if p["Copyright"] == "" {
				t.Errorf("Files: %s has no Copyright", p["Files"])
			}
			if p["Files"] == "*" {
				files = lic == License
			}
		case lic == License:
			body := p["License"]
			text = strings.Contains(body, "/usr/share/common-licenses/"+License) && strings.Contains(body, "Version 2.0")
		}
	}
	if !files {
		t.Errorf("no Files: * paragraph under License: %s", License)
	}
	if !text {
		t.Errorf("no stand-alone License: %s paragraph pointing at /usr/share/common-licenses/%s", License, License)
	}
}

// parseDeb822 reads Debian control-file paragraphs: "Field: value" lines, continuation lines
// starting with a space (a lone "." is an empty line), paragraphs apart by blank lines.
func parseDeb822(s string) ([]map[string]string, error) {
	var paras []map[string]string
	var cur map[string]string
	var last string
	for i, line := range strings.Split(s, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			cur, last = nil, ""
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: a continuation line without a field", i+1)
			}
			cur[last] += "\n" + strings.TrimSpace(line)
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("line %d: %q is not a field", i+1, line)
			}
			if cur == nil {
				cur = map[string]string{}
				paras = append(paras, cur)
			}
			if _, dup := cur[name]; dup {
				return nil, fmt.Errorf("line %d: field %s twice in a paragraph", i+1, name)
			}
			cur[name], last = strings.TrimSpace(value), name
		}
	}
	return paras, nil
}

func isParentOfAny(dir string, files map[string]debEntry) bool {
	for f := range files {
		if strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}

// installVar is the variable that allows TestDebInstall to install packages on this machine;
// .ci/run sets it on its throwaway machine.
const installVar = "VERDICT_DEB_INSTALL"

// TestDebInstall installs the verdictd package with dpkg, runs what it installed, and removes
// it. It changes the machine, so it runs only where installVar=1 says the machine is
// throwaway (and as root).
func TestDebInstall(t *testing.T) {
	if os.Getenv(installVar) != "1" {
		t.Skip(installVar + " is not 1: the package is not installed (dpkg -i changes this machine; .ci/run sets it on a throwaway one)")
	}
	if os.Geteuid() != 0 {
		t.Fatal(installVar + "=1, but dpkg -i needs root")
	}
	_, arts := testRelease(t)
	deb := artifact(t, arts, "deb", "verdictd")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("dpkg", "-i", deb)
	key := "/etc/verdict/verdictd/signing.jwk"
	keyMade := false
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "verdictd").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge verdictd: %v\n%s", err, out)
		}
		if _, err := os.Stat("/usr/bin/verdictd"); err == nil {
			t.Error("/usr/bin/verdictd is still there after dpkg --purge")
		}
		if !keyMade {
			return
		}
		// A purge leaves the key keygen wrote (docs/deploy.md): the operator removes it.
		if _, err := os.Stat(key); err != nil {
			t.Errorf("%s after dpkg --purge: %v, want it left in place", key, err)
		}
		if err := os.RemoveAll("/etc/verdict/verdictd"); err != nil {
			t.Error(err)
		}
		os.Remove("/etc/verdict") // only when nothing else is left there
	})
	if out := run("/usr/bin/verdictd", "version"); !strings.HasPrefix(out, "verdictd version "+testSource.Version+",") {
		t.Errorf("verdictd version printed %q", out)
	}
	if out := run("/usr/bin/verdictd", "check-policy", "/etc/verdict/policy.yaml"); !strings.Contains(out, "policy example.1: ok") {
		t.Errorf("verdictd check-policy printed %q", out)
	}
	run("/usr/bin/verdictd", "keygen", "--out", "/etc/verdict/verdictd")
	keyMade = true
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s after keygen: %v, want mode 0600", key, err)
	}
	if out := run("getent", "passwd", "verdictd"); !strings.Contains(out, ":/nonexistent:/usr/sbin/nologin") {
		t.Errorf("the verdictd user is %q", out)
	}
	if fi, err := os.Stat("/etc/verdict/verdictd"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("/etc/verdict/verdictd: %v %v, want a directory of mode 0700", fi.Mode(), err)
	}
}
