// Package api holds the types that cross package and process boundaries: the preflight
// request, the decision record, the names of phases, outcomes, gates, sources and codes, and
// the error envelope. It depends on the standard
// library alone, so that a client, the gate and the tools that read its records share one
// description of each type.
//
// Each type's JSON is its struct tags, with two exceptions that say so: an Instruction is an
// array of segments or a plain string, and a Value tracks whether it was sent at all. Read
// these types with package apijson, which reads them strictly where a request must be
// (exact member names, no unknown or duplicate member) and keeps numbers exact; encoding/json
// writes them as apijson does.
package api
