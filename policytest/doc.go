// Package policytest runs a policy's test cases through the real preflight engine, in
// process: `verdictd policy test`. A test file (docs/policy-testing.md) holds cases, each a
// conversation of steps; a step is a proposed call — server, tool, the user's words and other
// segments with their trust, intent, arguments, pre-set data, answers and approvals to the
// questions of the steps before — with what the world answers (measurement results, the C3
// webhook, the clock) as fixed values, and what the step must come to: the outcome, the slots
// known and their sources, the slots unknown and their routes, the questions asked, the unmet
// items, the call arguments of a verdict, the notices.
//
// Runs are deterministic: no daemon, no network, no real clock, ids counted per case. The
// engine is gates.Engine with the CEL evaluator, as verdictd runs it; what verdictd adds
// around it (signing, records, the console's store, a recurrence's count) is not run, and a
// record's verdict stays unsigned.
//
// Coverage says which tools, arguments, allowed sources, routes, conditions, checklist items
// and approvals of the policy no case exercised (Coverage).
package policytest
