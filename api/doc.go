// Package api holds the types that cross package and process boundaries: the preflight
// request, the decision record, the execute request and answer, the execution record, the
// receipt answer, the names of phases, outcomes, gates, sources and codes, the error envelope,
// and the completion trailers of a JSONL export with their check (CheckExportTrailer), which
// the daemons' clients share. openapi.yaml, beside this package, describes the HTTP APIs these
// types travel in. It depends on the standard library alone, so that a client, the gate and
// the tools that read its records share one description of each type.
//
// Each type's JSON is its struct tags, with two exceptions that say so: an Instruction is an
// array of segments or a plain string, and a Value tracks whether it was sent at all. Read and
// write these types with package apijson, which reads a request strictly (exact member names,
// no unknown or duplicate member), keeps numbers exact, and writes the decision record;
// encoding/json writes a request as apijson reads it.
package api
