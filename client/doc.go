// Package client calls verdictd's and the executor's HTTP APIs (docs/api.md, described in
// api/openapi.yaml): a preflight, the answers to its questions, an execution, a receipt, and the
// JSONL exports of both record sets with their completion trailers checked.
//
// A Client talks to one daemon: New(base URL, options). It sends the caller token (WithToken)
// on preflights, receipts and executions, and the admin token (WithAdminToken) on record reads.
// A subject token (the user's own access token, forwarded so that verdictd decides the
// principal) rides on the context of one call: WithSubjectToken. The approvals API
// (Approvals, Approval with its long poll, Decide) authenticates with the Client's token too:
// a caller token only reads; a Client made with an approver's own access token decides.
//
// Every answer other than the one the call expects is an error, and a refusal is an *Error
// carrying the HTTP status and the error envelope's code:
//
//	rec, err := vd.Preflight(ctx, &req)
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == "unauthorized" { ... }
//
// An execution refused or failed still has an execution record: Execute returns the answer
// beside the *Error. An export is complete only when its trailers say so: Records and
// Executions return an error wrapping api.ErrExportIncomplete otherwise, after handing over
// the lines that did arrive.
//
// The package imports only the api packages and the standard library, so that an integrator
// takes in nothing else.
package client
