package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/rawjson"
)

// The raw check of a tools/call.
//
// The MCP library decodes a call's _meta into a map, where the last of two
// members with one name wins, and the gateway reads its own entries from
// that map. A host (or whatever writes its messages) that sends
// {"trust": "untrusted", ..., "trust": "user"} would then have the gate read
// one value while every other reader of the same bytes — a log, an
// auditor, verdictd itself, which refuses duplicates — sees another. So the
// params of every tools/call are checked on the bytes the host sent, before
// anything decodes them, wherever the transport hands the gateway a message
// (see screenedTransport and screenHTTP): a params object that names a
// member twice in one object, at any depth, is never decoded as such
// (package rawjson reads the bytes).

// maxParamsDepth bounds the nesting of a tools/call's params, the params
// object being the first level. The check recurses once per level, so the
// bound is also what a depth bomb costs.
const maxParamsDepth = 64

// protocolMetaPrefix starts the names of the MCP protocol's own _meta
// members.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// metaRefused is the _meta member under which the raw check hands its
// finding (a reason code) to the tool handler, which refuses the call with
// it. A host that sends this member itself has its call refused.
const metaRefused = "io.verdict/refused"

// screenParams checks the params of a tools/call as the host sent them.
// Params without a repeated member name (anywhere, arguments included)
// and within maxParamsDepth come back unchanged, the same bytes. Any other
// params come back as a call the handler refuses: the tool's name (when
// the params name it exactly once), and _meta holding the protocol's own
// members of the host's _meta (io.modelcontextprotocol/*) that are sound
// on their own — a 2026-07-28 request needs them to reach the handler at
// all — plus metaRefused with the reason code: arguments_invalid when the only
// problem is inside arguments, meta_invalid otherwise. Arguments, answers
// and requestState are dropped: nothing of such a call is used.
//
// Params that are not a JSON object at all are left to the MCP library,
// which refuses them, unless the check could not read what the library
// might: then the call becomes a refused call without a name.
func screenParams(params json.RawMessage) (json.RawMessage, *rawjson.PathError) {
	if len(bytes.TrimSpace(params)) == 0 {
		return params, nil
	}
	err := rawjson.Check(params, maxParamsDepth)
	if err == nil {
		return params, nil
	}
	pe, ok := errors.AsType[*rawjson.PathError](err)
	if !ok {
		pe = &rawjson.PathError{Err: err}
	}
	ms, merr := topLevel(params)
	if merr != nil {
		return refusedParams(nil, nil, api.ReasonMetaInvalid), pe
	}
	reason := api.ReasonArgumentsInvalid
	names := map[string]int{}
	for _, m := range ms {
		names[rawjson.FoldName(m.name)]++
	}
	var (
		name      json.RawMessage
		meta      fieldList
		metaNames = map[string]int{}
	)
	for _, m := range ms {
		// A member's value sits one level below the params, so within one
		// level fewer.
		if names[rawjson.FoldName(m.name)] > 1 || (m.name != "arguments" && rawjson.Check(m.value, maxParamsDepth-1) != nil) {
			reason = api.ReasonMetaInvalid
		}
		if m.name == "name" && names[rawjson.FoldName(m.name)] == 1 {
			name = m.value
		}
		// The protocol's own members of _meta that are sound: in every
		// "_meta" object, those whose name appears once across all of them
		// and whose value (two levels below the params) holds no problem of
		// its own.
		if m.name != "_meta" {
			continue
		}
		inner, err := topLevel(m.value)
		if err != nil {
			continue
		}
		for _, im := range inner {
			metaNames[rawjson.FoldName(im.name)]++
		}
		meta = append(meta, inner...)
	}
	var kept fieldList
	for _, m := range meta {
		if metaNames[rawjson.FoldName(m.name)] == 1 && strings.HasPrefix(m.name, protocolMetaPrefix) && rawjson.Check(m.value, maxParamsDepth-2) == nil {
			kept = append(kept, m)
		}
	}
	return refusedParams(name, kept, reason), pe
}

// refusedParams encodes the params of a call the handler refuses with
// reason.
func refusedParams(name json.RawMessage, meta fieldList, reason string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	if name == nil || !isJSONString(name) {
		name = json.RawMessage(`""`)
	}
	b.Write(name)
	b.WriteString(`,"_meta":{`)
	r, _ := json.Marshal(reason)
	for i, m := range append(slices.Clip(meta), field{name: metaRefused, value: r}) {
		if i > 0 {
			b.WriteByte(',')
		}
		n, _ := json.Marshal(m.name)
		b.Write(n)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

func isJSONString(v json.RawMessage) bool {
	var s string
	return json.Unmarshal(v, &s) == nil && utf8.ValidString(s)
}
