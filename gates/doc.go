// Package gates is the preflight engine: deterministic code that decides what must be settled
// before one irreversible tool call, looks every value up in its designated sources, counts what
// is still unknown, routes it, and writes the decision record. No model is ever called.
//
// A run takes the tool definition as its server lists it, the loaded policy and the decoded
// request ([DecodeRequest]) and returns a [Record] (docs/preflight.md):
//
//   - reads and reversible tools are not gated;
//   - Gate 1 settles the fixed checklist: C1 timing (never defaulted), C2 the user's name for the
//     action (a location in a user segment, else a user-trusted pre-set), C3 an explicit approval
//     of the tool, with separate ask ceilings for intent and tool;
//   - slot materialization reduces the input schema (root required, oneOf/anyOf of required
//     sets, if/then/else on a discriminator, local $ref) against the grounded partial state;
//     anything else is schema_unsupported, and so is a definition past the bounds that keep
//     its compilation cheap ([MaxInputSchemaBytes], [MaxSchemaProperties], [MaxSchemaNodes]);
//   - each slot walks the source cascade user_answer → instruction → pre_set_data →
//     measured_data → prior_state, restricted by the field's allowed sources, with located
//     candidates checked against the text they point at; a field the policy marks drafted
//     walks none of them: the model's proposal is the draft, frozen by its canonical digest and
//     shown in full (a review_draft question), known only by an approval of exactly that draft
//     (reviewed_draft), and never a segment, so it grounds no other field;
//   - measurements the run needs are performed by dependency depth, concurrently within a
//     depth, through a [Measurer] (package measure has the HTTP and MCP one); one whose inputs
//     are unknown waits (system_lookup), a failed one is lookup_failed (definition_repair), a
//     JSON null settles its slot as null; nothing measured is ever carried to another run;
//   - provider conditions and user-checklist expressions are CEL, evaluated by an [Evaluator]
//     ([CELEvaluator]) only once every input is known; false is unmet (hold), an unknown input
//     gives the route of what is missing, an error is definition_repair; checklist items are
//     verified only at trigger time, and a confirm item is an approval bound to the call; all
//     of a run's expressions share one evaluation budget ([Config.EvaluationBudget]), past
//     which the policy's are definition_repair and the request's refuse the request, whose
//     checklist [Limits] bound before anything is compiled;
//   - a scheduled, conditional or recurring request is deferred at instruction time when only
//     pending_at_trigger values are unknown, storing its intent ([Record.TriggerRequest]); the
//     trigger run re-fetches everything and excuses nothing;
//   - the payload is assembled from known values only and validated as a whole.
//
// A verdict is not this package's job: a record with outcome verdict_issued carries the exact
// call_arguments and their digest, and verdictd signs it.
package gates
