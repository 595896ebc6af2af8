package verdictd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// PolicyReport is what check-policy found in a policy file and its servers' tool listings.
type PolicyReport struct {
	Version string
	Servers []ServerReport
	// Problems are everything that needs fixing, each with its path and, where the file has
	// one, its line and column: file errors, definition issues (a condition that does not
	// compile), servers that could not be listed, tools whose definition makes every preflight a
	// definition repair, and policy entries for tools no server lists.
	Problems []policy.Problem
	// Warnings do not stop the policy from serving, but usually mean it does not do what its
	// author meant: a listed tool with no class (irreversible by default) that nothing can
	// approve, or a changed file under an unchanged policy_version.
	Warnings []policy.Problem
	// Approvals are the tools whose policy entry has an approval rule, with that rule, by
	// tool key in order.
	Approvals []ToolApproval
	// Relays are the tools whose policy entry has a relay rule, with that rule, by tool key in
	// order: which pass-through tools' servers may ask the user for secrets through the MCP
	// gateway.
	Relays []ToolRelay
}

// ToolRelay is a tool's relay rule as check-policy shows it.
type ToolRelay struct {
	Tool string // "server/tool"
	Rule policy.RelayRule
}

// ToolApproval is a tool's approval rule as check-policy shows it.
type ToolApproval struct {
	Tool string // "server/tool"
	Rule policy.ApprovalRule
}

// ServerReport is one policy server as check-policy listed it.
type ServerReport struct {
	ID    string
	Tools []string
	// Definitions are the listed tools' definition digests, in the order of Tools (a tool whose
	// definition is unusable has none), and what the policy's pins say of each.
	Definitions []ToolDefinition
}

// ToolDefinition is one listed tool's definition digest and its pin.
type ToolDefinition struct {
	Name   string
	Digest string // "" when the definition is unusable
	Pinned string // the policy's pin, "" when none
	// Held is why the tool's pin holds it back (a *policy.PinError), nil when it does not.
	Held error
}

// CheckOptions tune CheckPolicy.
type CheckOptions struct {
	// Timeout bounds listing one server. Zero means 15s.
	Timeout time.Duration
	// Previous, when set, is the path of the policy file in force: a changed file that keeps
	// its policy_version is warned about, since records name the policy by version.
	Previous string
}

// CheckPolicy loads the policy at path and lists every server's tools the way serve would,
// reporting every problem. The error is non-nil only when the check itself could not run;
// a policy with problems is a report with Problems.
func CheckPolicy(ctx context.Context, path string, opts CheckOptions) (*PolicyReport, error) {
	p, err := policy.Load(path)
	if pe, ok := errors.AsType[*policy.Error](err); ok {
		return &PolicyReport{Problems: pe.Problems}, nil
	}
	if err != nil {
		return nil, err
	}
	eng, err := gates.New(gates.Config{State: gates.NewMemState()})
	if err != nil {
		return nil, err
	}
	c := &policyCheck{p: p, eng: eng, rep: &PolicyReport{Version: p.Version, Problems: slices.Clone(p.Issues)},
		listed: map[string]map[string]bool{}}
	if remote := remoteServers(p); len(remote) > 0 {
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = 15 * time.Second
		}
		copts := upstream.CatalogOptions{Timeout: timeout, MaxAge: -1}
		copts.Client.ConnectTimeout = timeout
		if c.cat, err = upstream.NewCatalog(remote, copts); err != nil {
			c.problem("servers", err.Error())
			c.cat = nil
		} else {
			defer c.cat.Close()
			_ = c.cat.Refresh(ctx)
		}
	}
	inline := inlineTools(p)
	for _, id := range slices.Sorted(maps.Keys(p.Servers)) {
		c.server(id, inline[id])
	}
	c.toolEntries()
	rep := c.rep
	if opts.Previous != "" {
		if w, err := versionWarning(path, opts.Previous, p.Version); err != nil {
			return nil, err
		} else if w != "" {
			rep.Warnings = append(rep.Warnings, policy.Problem{Path: "policy_version", Msg: w})
		}
	}
	// The file was read once already; a copy changed since is only a worse place to point at.
	if data, err := os.ReadFile(path); err == nil {
		rep.Problems = policy.Locate(data, rep.Problems)
		rep.Warnings = policy.Locate(data, rep.Warnings)
	}
	return rep, nil
}

// policyCheck is a CheckPolicy in progress.
type policyCheck struct {
	p   *policy.Policy
	eng *gates.Engine
	cat *upstream.Catalog // the tools_from servers' listings; nil without any, or when it failed
	rep *PolicyReport
	// listed are the tools each server listed, by server id; a server that listed none is
	// absent.
	listed map[string]map[string]bool
}

func (c *policyCheck) problem(path, msg string) {
	c.rep.Problems = append(c.rep.Problems, policy.Problem{Path: path, Msg: msg})
}

// server reports on the tools of server id: those the policy writes inline (nil when it has
// the server list them), else those the server listed.
func (c *policyCheck) server(id string, inline map[string]upstream.Tool) {
	path := fmt.Sprintf("servers.%s", id)
	var tools []upstream.Tool
	if inline != nil {
		tools = slices.SortedFunc(maps.Values(inline), func(a, b upstream.Tool) int { return strings.Compare(a.Name, b.Name) })
		path += ".tools"
	} else {
		path += ".tools_from"
		var ok bool
		if c.cat != nil {
			tools, ok = c.cat.Tools(id)
		}
		if !ok {
			c.problem(path, "the server did not list its tools"+c.listingError(id))
			c.rep.Servers = append(c.rep.Servers, ServerReport{ID: id})
			return
		}
	}
	sr := ServerReport{ID: id}
	c.listed[id] = map[string]bool{}
	for _, t := range tools {
		sr.Tools = append(sr.Tools, t.Name)
		sr.Definitions = append(sr.Definitions, c.tool(id, path, t))
		c.listed[id][t.Name] = true
	}
	c.rep.Servers = append(c.rep.Servers, sr)
}

// listingError is why server id listed no tools, with what it wrote to its stderr, as the
// catalog knows it.
func (c *policyCheck) listingError(id string) string {
	msg := ""
	if c.cat != nil {
		for _, st := range c.cat.Status() {
			if st.ID == id && st.Err != nil {
				msg += ": " + st.Err.Error() + stderrLines(id, upstream.StderrTail(st.Err))
			}
		}
	}
	return msg
}

// tool reports on the tool t of server id, listed under path: its class, its pin, and whether
// its definition lets a preflight run.
func (c *policyCheck) tool(id, path string, t upstream.Tool) ToolDefinition {
	key := id + "/" + t.Name
	def := ToolDefinition{Name: t.Name, Digest: t.Digest}
	if pin := c.p.Pins[id]; pin != nil {
		def.Pinned = pin.Tools[t.Name]
	}
	if t.Err == nil {
		def.Held = c.p.CheckPin(id, t.Name, t.Digest)
	}
	if w := classWarning(c.p.Tools[key]); w != "" {
		c.rep.Warnings = append(c.rep.Warnings, policy.Problem{Path: fmt.Sprintf("tools[%q]", key), Msg: w})
	}
	tpath := fmt.Sprintf("%s[%q]", path, t.Name)
	if def.Held != nil {
		c.problem(fmt.Sprintf("pins.%s", id), def.Held.Error()+": it is held back until it is pinned again (verdictd catalog pin)")
	}
	if t.Err != nil {
		c.problem(tpath, "unusable definition: "+t.Err.Error())
		return def
	}
	g, err := c.eng.Inspect(gateTool(t), c.p.Tools[key])
	switch {
	case err != nil:
		c.problem(tpath, err.Error())
	case g != nil && g.Kind == api.GatePolicyMismatch:
		c.problem(fmt.Sprintf("tools[%q]", key), g.Detail)
	case g != nil:
		c.problem(tpath, "every preflight would end in definition_repair: "+g.Kind+": "+g.Detail)
	}
	return def
}

// toolEntries reports the policy's tools entries: their approval and relay rules, and those
// naming a tool their server did not list.
func (c *policyCheck) toolEntries() {
	for _, k := range slices.Sorted(maps.Keys(c.p.Tools)) {
		if a := c.p.Tools[k].Approval; a != nil {
			c.rep.Approvals = append(c.rep.Approvals, ToolApproval{Tool: k, Rule: *a})
		}
		if r := c.p.Tools[k].Relay; r != nil {
			c.rep.Relays = append(c.rep.Relays, ToolRelay{Tool: k, Rule: *r})
		}
		server, name, _ := strings.Cut(k, "/")
		if set, ok := c.listed[server]; ok && !set[name] {
			c.problem(fmt.Sprintf("tools[%q]", k), fmt.Sprintf("server %s lists no tool %s", server, name))
		}
	}
}

// classWarning says what is wrong with a listed tool the policy gives no class: it is treated
// as irreversible, and without actions or an approver no call to it can ever be approved.
func classWarning(pt *policy.Tool) string {
	switch {
	case pt == nil:
		return "the policy does not name this tool: it is treated as irreversible and, with no actions or approver, can never be approved; classify it (read, reversible or irreversible)"
	case pt.Class != "":
		return ""
	case len(pt.Actions) == 0 && pt.Approver == nil:
		return "no class: treated as irreversible, and with no actions or approver it can never be approved"
	}
	return "no class: treated as irreversible; say class: irreversible to make it explicit"
}

// versionWarning compares the policy file at path with the one at previous: different content
// under the same policy_version is a warning.
func versionWarning(path, previous, version string) (string, error) {
	cur, err := opfile.ReadFile(path)
	if err != nil {
		return "", err
	}
	prevData, err := opfile.ReadFile(previous)
	if err != nil {
		return "", fmt.Errorf("previous policy: %w", err)
	}
	if bytes.Equal(cur, prevData) {
		return "", nil
	}
	prev, err := policy.Parse(prevData)
	if err != nil || prev.Version != version {
		return "", nil
	}
	return fmt.Sprintf("the file differs from %s but keeps policy_version %q: records could not tell the two policies apart", previous, version), nil
}

// stderrLines quotes what a stdio server wrote to its stderr before it failed, one line of the
// report per line, each prefixed with the server's id: that text usually says why ("None of the
// specified directories are accessible") where the error only says that the connection closed.
func stderrLines(id, tail string) string {
	if tail == "" {
		return ""
	}
	var b strings.Builder
	for line := range strings.Lines(tail) {
		fmt.Fprintf(&b, "\n  %s stderr: %s", id, strings.TrimSuffix(line, "\n"))
	}
	return b.String()
}
