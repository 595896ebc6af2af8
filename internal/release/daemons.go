package release

// A Daemon is one of the four programs as it is shipped.
type Daemon struct {
	// Command is the directory under cmd/ the binary is built from, and the binary's name in a
	// release archive and an image.
	Command string
	// Package is the Debian package's name.
	Package string
	// Binary is the name the package installs in /usr/bin.
	Binary string
	// Unit is the systemd unit under deploy/systemd/, and User the system user it runs as.
	Unit, User string
	// Port is the port the packaged config and the image listen on.
	Port int
	// Summary and Description describe the package and the image.
	Summary, Description string
	// Configs are the files under deploy/etc/ the package installs in /etc/verdict/, with
	// their modes: a config carrying secrets in clear is root's alone, and reaches the service
	// as a systemd credential.
	Configs []Config
	// CredentialDir is the directory under /etc/verdict/ that holds the keys and tokens the
	// unit loads as credentials; root's, mode 0700.
	CredentialDir string
}

// A Config is a file the package installs under /etc/verdict/.
type Config struct {
	Name string
	Mode uint32
}

// Daemons are the four programs, in the order they are built.
var Daemons = []Daemon{
	{
		Command: "verdictd", Package: "verdictd", Binary: "verdictd",
		Unit: "verdictd.service", User: "verdictd", Port: 8780,
		Summary:       "verdict gate: preflight and signed verdicts for AI-agent tool calls",
		Description:   "verdictd settles every value of an irreversible tool call from designated sources and signs a verdict the executor verifies.",
		Configs:       []Config{{"verdictd.yaml", 0o644}, {"policy.yaml", 0o644}},
		CredentialDir: "verdictd",
	},
	{
		Command: "executor", Package: "verdict-executor", Binary: "verdict-executor",
		Unit: "verdict-executor.service", User: "verdict-executor", Port: 8781,
		Summary:       "verdict executor: runs a verdict's tool call once and records it",
		Description:   "The executor verifies a verdict, consumes it once, calls the MCP tool, records the outcome and signs a receipt.",
		Configs:       []Config{{"executor.yaml", 0o644}},
		CredentialDir: "executor",
	},
	{
		Command: "mcpgate", Package: "verdict-mcpgate", Binary: "mcpgate",
		Unit: "mcpgate.service", User: "mcpgate", Port: 8792,
		Summary:       "verdict MCP gateway: puts irreversible MCP tool calls through verdictd",
		Description:   "mcpgate is an MCP server in front of MCP hosts: it forwards reads and sends irreversible calls through verdictd and the executor, asking the user by elicitation.",
		Configs:       []Config{{"mcpgate.yaml", 0o600}},
		CredentialDir: "mcpgate",
	},
	{
		Command: "verdict-console", Package: "verdict-console", Binary: "verdict-console",
		Unit: "verdict-console.service", User: "verdict-console", Port: 8793,
		Summary:       "verdict review console: approvals and records in a browser",
		Description:   "verdict-console is a web application where approvers sign in at the OpenID Provider and decide the approvals a policy sends to the console, and auditors read the decision and execution records paired. It holds no key and decides nothing.",
		Configs:       []Config{{"console.yaml", 0o644}},
		CredentialDir: "console",
	},
}
