// Package ship pushes decision and execution records out of a daemon to a log pipeline: in
// batches to an HTTP sink (gzip JSON in an envelope an OPA decision-log endpoint accepts, or
// JSONL) and/or to a rotating local file.
//
// Delivery is at least once. The records come from the daemon's own bbolt file through its
// outbox (store.Outbox): every record write appends an entry in the same commit, each sink keeps
// its cursor in the same file, and a cursor moves only after the sink acknowledged the batch.
// After a crash or a sink outage shipping resumes at the cursor; what a sink may see twice is at
// most the one batch that was in flight.
//
// Shipping never holds up a decision or an execution: a record is committed first and shipped
// later by a goroutine of its own. A sink that lags more than MaxLag records behind loses the
// oldest (counted in <daemon>_ship_dropped_records_total and logged), so an outage bounds the
// outbox instead of growing the file without end.
//
// Records are masked as the record exports mask them (store.DefaultMask) unless a sink is
// configured unmasked.
package ship
