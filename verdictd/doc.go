// Package verdictd is the gate service: it runs the deterministic preflight (package gates)
// over a proposed tool call, stores every decision record append-only in its bbolt file, and
// signs a verdict only for a record whose outcome is verdict_issued — the record and its verdict
// are written in one commit, so a verdict never exists without its record.
//
// Around the engine it owns what a daemon needs (docs/operations.md): the policy, loaded at
// start and reloaded atomically on file change or SIGHUP (a broken file keeps the old policy);
// the tool catalog of every policy server, listed over MCP or given inline, refreshed on an
// interval; the conversation state the engine keeps between runs (ask counters, question ids,
// receipt-confirmed prior values, deferred intents); execution receipts, which are the only way
// a value becomes prior_state; and the HTTP API with its caller and admin tokens, limits and
// metrics.
//
// The conversation state is a convstate.Store, and each run gets its own convstate.Run through
// gates.Input. It lives in the bbolt file by default, written in the commit of each run's
// record. With state_store kind etcd it lives in an etcd cluster that several replicas share:
// each run commits its state changes there in one compare-and-swap transaction before its
// record is written, and a store that does not answer fails the preflight closed with 503
// state_store_unavailable. Decision records stay in each replica's own file. On either store a
// conversation idle for conversation_ttl is forgotten (etcd by lease, bbolt by a collector that
// Run starts), and a principal holding max_conversations_per_principal live conversations is
// refused a new one with 429 conversation_limit before anything is decided.
//
// A preflight is bounded: its request's checklist by item count and expression sizes before
// anything is compiled, its expressions by one evaluation budget, and the whole by
// preflight_timeout, well within the server's write timeout ([WriteTimeout]). A preflight not
// decided in time is refused with 503 preflight_timeout and nothing of it is committed; a
// committed record is always written back to its caller.
//
// Console and webhook approvals are package approvals' (docs/approvals.md): a preflight reads
// those of its call under the conversation's lock and commits the one its record creates or
// uses with the record; verdictd mounts the approvals API and authenticates who asks it
// (viewer). They live where the conversation state does: in the bbolt file, or in the etcd
// cluster the replicas share, changed in the transaction of the run's state.
//
// A trigger run is first held to what its deferred record has left (trigger.go): a scheduled or
// conditional intent runs to one verdict, a recurring one as its tool's recurrence allows, and
// the run that ends in a verdict uses its occurrence up in the same commit as the verdict (in
// the bbolt transaction, or the etcd compare-and-swap), so concurrent triggers get one verdict.
// A receipt changes the executed baseline only when its verdict's record id, which this
// service mints strictly increasing, is newer than the baseline's; one older than
// receipt_max_age is refused.
package verdictd
