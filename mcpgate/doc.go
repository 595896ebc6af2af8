// Package mcpgate owns the MCP gateway: an MCP server that any MCP host
// connects to instead of the real tool servers. It re-exposes the policy
// servers' tools, resources and prompts (each server at an endpoint of its
// own, under its own names, and all of them together at /mcp), passes
// through everything that runs no action, and puts each irreversible call
// through the gate: a preflight at verdictd, the user's own answers through
// MCP elicitation, and execution only by the executor on a signed verdict.
//
// The design, and the reason for each rule, is in docs/gateway.md in the
// repository.
package mcpgate
