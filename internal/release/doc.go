// Package release builds what a release ships, from a clean checkout and without a network:
//
//   - static binaries (CGO_ENABLED=0, -trimpath, the build stamped into internal/buildinfo by
//     linker flags) of verdictd, the executor, mcpgate and the review console, per target
//     platform;
//   - a Debian package per daemon, built with nfpm: the binary, its systemd unit, its system
//     user (sysusers.d and the preinst), its configs under /etc/verdict/ as conffiles, its
//     manual page, changelog and copyright, and the lintian overrides it needs (with why);
//   - an OCI image per daemon and platform, built with go-containerregistry from nothing: one
//     layer holding the binary alone, run as a non-root user, written as an OCI layout tarball;
//   - SHA256SUMS over all of it;
//   - on request, the table of their sizes in docs/deploy.md (SizesTable).
//
// Everything is reproducible from the commit: file times are the commit time, the build
// records no paths, and the version comes from the commit's tag (or a pseudo-version naming
// the commit). A tree with changes is refused unless asked for, and then says so in every
// binary. The command is go run ./deploy/release; docs/deploy.md describes the artifacts.
package release
