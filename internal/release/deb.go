package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

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
	// Scripts is a directory the maintainer scripts are written to.
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
	deploy := filepath.Join(opts.Root, "deploy")
	root := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: src.Time}
	}
	contents := files.Contents{
		{Source: opts.Binary, Destination: "/usr/bin/" + d.Binary, FileInfo: root(0o755)},
		{Source: filepath.Join(deploy, "systemd", d.Unit), Destination: "/usr/lib/systemd/system/" + d.Unit, FileInfo: root(0o644)},
		{Source: filepath.Join(deploy, "sysusers", d.User+".conf"), Destination: "/usr/lib/sysusers.d/" + d.User + ".conf", FileInfo: root(0o644)},
		{Source: filepath.Join(deploy, "debian", "copyright"), Destination: DebCopyright(d), FileInfo: root(0o644)},
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
	maintainer := opts.Maintainer
	if maintainer == "" {
		maintainer = DefaultMaintainer
	}
	info := &nfpm.Info{
		Name:        d.Package,
		Arch:        t.Arch,
		Platform:    t.OS,
		Version:     src.Version,
		Section:     "net",
		Priority:    "optional",
		Maintainer:  maintainer,
		Description: d.Summary + "\n" + d.Description,
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

// The maintainer scripts. The package creates its system user before its files are unpacked
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
		systemctl try-restart {{.Unit}} >/dev/null || true
	fi
fi
`,
	"prerm": `#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop {{.Unit}} >/dev/null || true
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
