// Package e2e holds the end-to-end evidence that the gateway survives what it is built for: the
// daemons run as real processes against real MCP servers, are killed with SIGKILL under load,
// are fed the hostile requests of testdata/adversarial, and are checked against properties
// generated with pgregory.net/rapid. The package has no API; everything lives in its tests.
package e2e
