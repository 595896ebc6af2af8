package release

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// Homepage is the packages' and images' origin. DefaultMaintainer is the packages' Maintainer
// field unless the release says otherwise (deploy/release -maintainer): Debian requires one,
// and the project publishes no address of its own, so the default names an address that
// cannot exist rather than one that might belong to someone.
const (
	Homepage          = "https://github.com/verdictgate/verdict"
	DefaultMaintainer = "verdict maintainers <maintainers@verdictgate.invalid>"
)

// DebOptions say where a package's parts are.
type DebOptions struct {
	// Root is the module's root, whose deploy/ holds the units, users and configs.
	Root string
	// Binary is the built binary for the package's architecture.
	Binary string
	// Scripts is a directory the maintainer scripts and the other generated files (the
	// changelog, the compressed manual page, the lintian overrides) are written to.
	Scripts string
	// Maintainer is the package's Maintainer field; empty is DefaultMaintainer.
	Maintainer string
}

// License is the SPDX identifier of the project's licence: the Debian packages' copyright file
// and the images' org.opencontainers.image.licenses label name it.
const License = "Apache-2.0"

// DebCopyright is where d's package installs deploy/debian/copyright, the licence in Debian's
// machine-readable copyright format, as Debian policy (12.5) places it.
func DebCopyright(d Daemon) string { return "/usr/share/doc/" + d.Package + "/copyright" }

// DebManPage is where d's package installs its manual page, deploy/debian/man/<binary>.1,
// compressed as Debian policy (12.1) asks.
func DebManPage(d Daemon) string { return "/usr/share/man/man1/" + d.Binary + ".1.gz" }

// DebChangelog is where d's package installs its changelog. Debian names it changelog.gz in a
// native package (a version without a "-": a tagged release) and changelog.Debian.gz otherwise
// (a pseudo-version, whose commit suffix dpkg reads as a Debian revision).
func DebChangelog(d Daemon, src Source) string {
	name := "changelog.gz"
	if strings.Contains(debVersion(src), "-") {
		name = "changelog.Debian.gz"
	}
	return "/usr/share/doc/" + d.Package + "/" + name
}

// DebLintianOverrides is where d's package installs its lintian overrides.
func DebLintianOverrides(d Daemon) string { return "/usr/share/lintian/overrides/" + d.Package }

// A LintianOverride is a lintian tag a package raises on purpose: Context is the tag's
// context as lintian prints it, Reason why the package is right (one line, shipped as the
// override's comment and listed in docs/deploy.md).
type LintianOverride struct {
	Tag, Context, Reason string
}

// The reasons, one per kind of override.
const (
	reasonStatic   = "Go binary built with CGO_ENABLED=0: static on purpose, so one file runs on every Linux and in an image with no libc."
	reasonKeyDir   = "holds the daemon's private keys and tokens, loaded by systemd as credentials: root's alone, mode 0700."
	reasonSecretCf = "carries caller tokens in clear and reaches the service as a systemd credential: root's alone, mode 0600."
)

// LintianOverrides are the lintian tags d's package raises on purpose: every other error or
// warning is a fault of the package (TestDebLintian).
func LintianOverrides(d Daemon) []LintianOverride {
	o := []LintianOverride{
		{"statically-linked-binary", "[usr/bin/" + d.Binary + "]", reasonStatic},
		{"non-standard-dir-perm", "0700 != 0755 [etc/verdict/" + d.CredentialDir + "/]", reasonKeyDir},
	}
	for _, c := range d.Configs {
		if c.Mode == 0o600 {
			o = append(o, LintianOverride{"non-standard-file-perm", "0600 != 0644 [etc/verdict/" + c.Name + "]", reasonSecretCf})
		}
	}
	return o
}

// DebFileName is the package's file name, Debian's way: name_version_arch.deb.
func DebFileName(d Daemon, src Source, t Target) string {
	return fmt.Sprintf("%s_%s_%s.deb", d.Package, debVersion(src), t.Arch)
}

// debVersion is the Debian version of a release: the tag without its "v"; a pseudo-version's
// suffix sorts before the release it precedes (~).
func debVersion(src Source) string {
	v := src.Version
	if len(v) > 0 && v[0] == 'v' {
		v = v[1:]
	}
	if base, pre, ok := strings.Cut(v, "-"); ok {
		return base + "~" + pre
	}
	return v
}

// BuildDeb writes d's Debian package for t to out (a file path).
func BuildDeb(opts DebOptions, d Daemon, src Source, t Target, out string) error {
	scripts, err := writeScripts(opts.Scripts, d)
	if err != nil {
		return fmt.Errorf("deb %s: %w", d.Package, err)
	}
	maintainer := cmp.Or(opts.Maintainer, DefaultMaintainer)
	deploy := filepath.Join(opts.Root, "deploy")
	gen := filepath.Join(opts.Scripts, d.Package)
	changelog, man, overrides := filepath.Join(gen, "changelog.gz"), filepath.Join(gen, d.Binary+".1.gz"), filepath.Join(gen, "lintian-overrides")
	page, err := os.ReadFile(filepath.Join(deploy, "debian", "man", d.Binary+".1"))
	if err != nil {
		return fmt.Errorf("deb %s: %w", d.Package, err)
	}
	for _, f := range []struct {
		path string
		data []byte
		gz   bool
	}{
		{changelog, debChangelog(d, src, maintainer), true},
		{man, page, true},
		{overrides, lintianOverrides(d), false},
	} {
		if err := writeGenerated(f.path, f.data, f.gz); err != nil {
			return fmt.Errorf("deb %s: %w", d.Package, err)
		}
	}
	root := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: src.Time}
	}
	contents := files.Contents{
		{Source: opts.Binary, Destination: "/usr/bin/" + d.Binary, FileInfo: root(0o755)},
		{Source: filepath.Join(deploy, "systemd", d.Unit), Destination: "/usr/lib/systemd/system/" + d.Unit, FileInfo: root(0o644)},
		{Source: filepath.Join(deploy, "sysusers", d.User+".conf"), Destination: "/usr/lib/sysusers.d/" + d.User + ".conf", FileInfo: root(0o644)},
		{Source: filepath.Join(deploy, "debian", "copyright"), Destination: DebCopyright(d), FileInfo: root(0o644)},
		{Source: changelog, Destination: DebChangelog(d, src), FileInfo: root(0o644)},
		{Source: man, Destination: DebManPage(d), FileInfo: root(0o644)},
		{Source: overrides, Destination: DebLintianOverrides(d), FileInfo: root(0o644)},
		{Destination: "/etc/verdict", Type: files.TypeDir, FileInfo: root(0o755)},
		{Destination: "/etc/verdict/" + d.CredentialDir, Type: files.TypeDir, FileInfo: root(0o700)},
	}
	for _, c := range d.Configs {
		contents = append(contents, &files.Content{
			Source:      filepath.Join(deploy, "etc", c.Name),
			Destination: "/etc/verdict/" + c.Name,
			Type:        files.TypeConfigNoReplace,
			FileInfo:    root(os.FileMode(c.Mode)),
		})
	}
	info := &nfpm.Info{
		Name:        d.Package,
		Arch:        t.Arch,
		Platform:    t.OS,
		Version:     src.Version,
		Section:     "net",
		Priority:    "optional",
		Maintainer:  maintainer,
		Description: d.Summary + "\n" + wrap(d.Description, 72),
		Vendor:      "verdict",
		Homepage:    Homepage,
		MTime:       src.Time,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Depends:  []string{"passwd"},
			Scripts:  scripts,
			Deb:      nfpm.Deb{Compression: "gzip"},
		},
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("deb %s: %w", d.Package, err)
	}
	if err := deb.Default.Package(nfpm.WithDefaults(info), f); err != nil {
		f.Close()
		return fmt.Errorf("deb %s: %w", d.Package, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("deb %s: %w", d.Package, err)
	}
	return nil
}

// The maintainer scripts. They act on the unit through deb-systemd-invoke (init-system-helpers,
// an essential package), which honours policy-rc.d, as Debian asks. The package creates its system user before its files are unpacked
// (preinst), tells systemd of the unit, and never enables or starts it at install: the shipped
// configs accept nobody and name keys that do not exist yet. An upgrade restarts a running
// service; removal stops it. The user and /var/lib/<user> (the decision or execution records:
// audit data) are left in place, even on purge, and so are the keys keygen wrote under
// /etc/verdict/<dir>/: the key that signed the records is what verifies them, so only the
// operator removes it (docs/deploy.md).
var scriptTemplates = map[string]string{
	"preinst": `#!/bin/sh
set -e
if [ "$1" = install ] || [ "$1" = upgrade ]; then
	if ! getent passwd {{.User}} >/dev/null; then
		useradd --system --user-group --home-dir /nonexistent --no-create-home \
			--shell /usr/sbin/nologin --comment "verdict {{.User}} daemon" {{.User}}
	fi
fi
`,
	"postinst": `#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	if [ -n "$2" ]; then
		deb-systemd-invoke try-restart {{.Unit}} >/dev/null || true
	fi
fi
`,
	"prerm": `#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	deb-systemd-invoke stop {{.Unit}} >/dev/null || true
fi
`,
	"postrm": `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
`,
}

func writeScripts(dir string, d Daemon) (nfpm.Scripts, error) {
	dir = filepath.Join(dir, d.Package)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nfpm.Scripts{}, err
	}
	paths := map[string]string{}
	for name, text := range scriptTemplates {
		var b bytes.Buffer
		if err := template.Must(template.New(name).Parse(text)).Execute(&b, d); err != nil {
			return nfpm.Scripts{}, err
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o755); err != nil {
			return nfpm.Scripts{}, err
		}
		paths[name] = p
	}
	return nfpm.Scripts{
		PreInstall:  paths["preinst"],
		PostInstall: paths["postinst"],
		PreRemove:   paths["prerm"],
		PostRemove:  paths["postrm"],
	}, nil
}

// debChangelog is the package's changelog: one entry for the release, in the format
// dpkg-parsechangelog reads, dated by the commit. The project keeps its history in git; the
// entry names the commit it was built from.
func debChangelog(d Daemon, src Source, maintainer string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s (%s) unstable; urgency=medium\n\n", d.Package, debVersion(src))
	fmt.Fprintf(&b, "  * Release %s, built from the commit\n    %s.\n\n", src.Version, src.Revision)
	fmt.Fprintf(&b, " -- %s  %s\n", maintainer, src.Time.UTC().Format(time.RFC1123Z))
	return b.Bytes()
}

// lintianOverrides is the overrides file of d's package: each override after its reason.
func lintianOverrides(d Daemon) []byte {
	var b bytes.Buffer
	for _, o := range LintianOverrides(d) {
		fmt.Fprintf(&b, "# %s\n%s: %s %s\n", o.Reason, d.Package, o.Tag, o.Context)
	}
	return b.Bytes()
}

// writeGenerated writes data to path, gzip-compressed at the best level with no name and no
// time in the header when gz is set (the same bytes from the same commit).
func writeGenerated(path string, data []byte, gz bool) error {
	if gz {
		var b bytes.Buffer
		w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		data = b.Bytes()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// wrap breaks s into lines of at most width bytes at spaces: a control file's extended
// description is read on an 80-column terminal.
func wrap(s string, width int) string {
	var lines []string
	var line string
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
