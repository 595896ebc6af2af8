// Package deploy holds what installs and runs the daemons, and the tests that keep it working:
//
//   - systemd/: the units of verdictd, the executor, mcpgate and the console, hardened (systemd-analyze
//     security rates each "OK"), with keys and tokens handed over as systemd credentials;
//   - sysusers/: the system user of each unit;
//   - debian/: the copyright file every Debian package installs under /usr/share/doc/, and the
//     manual page of each binary (man/);
//   - etc/: the configs the Debian packages install under /etc/verdict/, fail-closed as shipped;
//   - prometheus/: alert rules over the daemons' metrics, with their promtool unit tests;
//   - helm/verdict/: a Helm chart running the daemons and, when enabled, the console as
//     separate workloads;
//   - release/: the release build (go run ./deploy/release): static binaries, SHA256SUMS,
//     Debian packages and OCI image layouts under dist/, and with -sizes-doc the sizes table
//     of docs/deploy.md.
//
// docs/deploy.md describes them. The Go code of the release lives in internal/release.
package deploy
