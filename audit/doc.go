// Package audit pairs verdictd's decision records with the executors' execution records and
// reports what an operator must look at: every execution that no issued verdict accounts for,
// every verdict that reached a tool more than once, and every pair whose bound values
// disagree.
//
// # Sources
//
// Records are read from any number of sources of each kind, merged: a bbolt file (opened
// read-only with a shared lock, so a file a running daemon holds cannot be read — use its HTTP
// endpoint), a JSONL export, or a daemon's HTTP records endpoint (verdictd's /v1/records,
// the executor's /v1/executions) with the admin token. A record present in several sources
// (overlapping exports, a file and its export) is counted once, by record id.
//
// # Completeness
//
// The audit never reports on part of a source: a read that fails midway fails the audit with
// a *SourceError. A JSONL stream, however, can end cleanly at a line boundary before its last
// record, and then reads exactly like a whole, shorter export. So:
//
//   - an HTTP source counts only when the daemon confirms the end of its export with the
//     trailers api.ExportCompleteTrailer ("true") and api.ExportRecordsTrailer (the number
//     of records it wrote), and that number is the number of records read; a response without
//     them (a daemon that failed midway, a cut connection, a proxy that drops HTTP trailers) or
//     with another count fails the audit with a *SourceError wrapping
//     api.ErrExportIncomplete;
//   - a bbolt file is read whole through the store;
//   - a JSONL file proves nothing: one cut at a line boundary (a copy or download that stopped
//     early, a pipe whose writer died) cannot be told apart from a whole export, so that the
//     file is complete is the operator's responsibility. The report says so: each source's
//     Completeness (Confirmed, StoreFile or Unverified), and a note under the text report's
//     sources.
//
// # Pairing
//
// An execution record is an attempt when its execution_decision is started, executed, failed
// or outcome_unknown: the tool was called, or may have been. Attempts are grouped by verdict id
// and paired with the decision record whose outcome is verdict_issued and whose verdict_id is
// that id. not_executed records are refusals, or calls the executor started whose request
// never reached the tool's server (upstream_unavailable): they are counted by reason and are
// never anomalies, since refusing, or not sending to a server that cannot be reached, is the
// executor doing its job. A record read started in one source and finished in another is one
// record: a started record finishes as an attempt or, never sent, as not_executed
// upstream_unavailable.
//
// The audit reads every execution source first and keeps a small summary per execution
// record; it then streams the decision sources, keeping only the decision records an
// execution refers to and the id, outcome and verdict id of every other one (to count each
// record once). Memory grows with the number of records, not with their size.
//
// With Options.Pairings the report also lists every pairing (Report.Pairings): each verdict id
// with attempts, the decision records that issued it and the attempts under it. A reader that
// shows pairs, such as the review console's audit view, takes them from there rather than pairing
// records itself.
//
// # Anomalies
//
// The contract's five (docs/api.md), and five more a consistent record set never shows:
//
//   - execution_without_verdict: attempts under a verdict id that no decision record issued;
//   - decision_not_issued: attempts under a verdict whose decision record (by verdict_id or by
//     the execution's ref_record) did not end in verdict_issued — reported instead of
//     execution_without_verdict, being the more precise finding;
//   - executed_more_than_once: more than one attempt under one verdict id, across every
//     execution source;
//   - arguments_digest_mismatch: an attempt whose arguments_digest differs from its decision
//     record's;
//   - started_not_finished: an attempt still started (Options.StartedGrace exempts calls that
//     may still be in flight at a live source);
//   - binding_mismatch: an attempt whose action_key, principal, server, tool, ref_phase or
//     ref_record disagrees with its decision record;
//   - verdict_issued_twice: two decision records carry the same verdict id (checked for the
//     verdict ids that have attempts);
//   - conflicting_records: one record id with different contents in two sources;
//   - consumed_unaccounted: a verdict refused as replayed or consumed_not_started, so
//     consumed before, with no attempt and no consumed_without_start record in any execution
//     source: an executor consumed it in a shared nonce store and has not recorded it (it
//     crashed before its started record and has not restarted since);
//   - deferred_overused: a deferred record triggered to more verdicts than it was allowed —
//     one for a scheduled or conditional intent, the policy's recurrence count for a
//     recurring one, as its trigger records say (api.Occurrence). Trigger records that
//     predate that member are counted against the latest deferred record of their action key
//     before them, and a one-off timing allows them one verdict. Only decision records are
//     read: verdicts count whether or not they were executed.
//
// The audit reads records, never the nonce store. A verdict consumed and never started that
// nobody presented again leaves no record until its executor reconciles the store at its next
// start and writes consumed_without_start; until then it counts as issued and not executed.
// Once recorded it counts as consumed and not started (Report.ConsumedNotStarted lists each
// one): nothing ran, and the caller needs a fresh preflight.
//
// outcome_unknown attempts are not anomalies by themselves, but the report lists each one: an
// operator must find out from the upstream system whether the call took effect.
package audit
