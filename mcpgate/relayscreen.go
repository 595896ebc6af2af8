package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/askform"
	"github.com/verdictgate/verdict/visible"
	"github.com/verdictgate/verdict/wording"
)

// A relayed question says who asks.
//
// A question relayed from a pass-through tool's server is the server's
// text, not the gateway's, and the user must be able to tell the two
// apart: the gateway's own forms ask for approvals and values that decide
// a gated call, a server's question may come from anyone the policy lists.
// So every relayed message, and every title and description of its
// fields, starts with the server's id in a form the gateway's own
// questions never use (attribution), and a relayed text may not use that
// form, nor the gateway's own wording (reservedWording), anywhere, as
// package wording reads a text. And a question that asks for a secret
// (wording.Secret, or a field of format password) is not relayed unless
// the policy allows it for the tool: the gateway is no way for an
// untrusted read-only server to collect the user's credentials.

// attributionOpen starts the attribution of a relayed text.
const attributionOpen = "[server "

// attribution is what a relayed message, field title and field
// description start with: "[server bank] ". A server id is letters,
// digits, '_' and '-' (the policy's serverID), so it cannot close the
// bracket itself.
func attribution(server string) string { return attributionOpen + server + "] " }

// reservedWording is the wording a relayed question may not use: the
// gateway's own, and the attribution. Each phrase is looked for in every
// text of the question (its message, and every name and string of its
// schema, options included) as the text would read to the user
// (wording.Phrases): case, characters a host does not draw, spacing,
// punctuation, markup and common lookalike letters do not hide it. A
// phrase AtLineStart is reserved at the start of a line only ("Note:" is
// the gateway's; "Please note:" is not).
var reservedWording = wording.NewPhrases(
	// The opening line's first clause: a copy that changes its end still
	// reads as the gateway's.
	wording.Phrase{Text: firstClause(askform.Opening)},
	wording.Phrase{Text: askform.NoticeMark, AtLineStart: true},
	wording.Phrase{Text: askform.DraftMark},
	wording.Phrase{Text: approvalOpening},
	wording.Phrase{Text: connectOpening},
	wording.Phrase{Text: attributionOpen},
)

func firstClause(s string) string {
	before, _, _ := strings.Cut(s, ",")
	return before
}

// relayRefusal is why a server's question is not shown: its reason code,
// and what in the question, for the log.
type relayRefusal struct {
	reason, detail string
}

func (r *relayRefusal) Error() string { return r.reason + ": " + r.detail }

// result is the host's answer to the call whose question was refused.
func (r *relayRefusal) result(server string) *mcp.CallToolResult {
	asked := "a question worded like this app's own"
	if r.reason == api.ReasonRelayRefusedSecret {
		asked = "for a secret (such as a PIN, a password or a one-time code)"
	}
	return toolError(r.reason, fmt.Sprintf("The service %q asked %s, which this gateway does not pass on: "+
		"you were not asked, and the action was not completed.", server, asked))
}

// screenQuestion returns the question the host is shown for a server's
// form p: the message and each field's title and description attributed
// to the server, with the characters a host does not draw made visible
// (visible.Text), a field without a title titled with its name. A question
// that uses reserved wording, or that asks for a secret while
// allowSecrets is false, is a *relayRefusal; a schema that is not an
// object of flat properties is a plain error. Only the form travels: the
// server's _meta is not shown to the host.
func screenQuestion(server string, p *mcp.ElicitParams, allowSecrets bool) (*mcp.ElicitParams, error) {
	schema, props, err := formSchema(p.RequestedSchema)
	if err != nil {
		return nil, err
	}
	if w := reservedWording.In(p.Message); w != "" {
		return nil, &relayRefusal{api.ReasonRelayRefusedWording, fmt.Sprintf("the message uses %q", w)}
	}
	if at, w := findInSchema("", schema, true, nil, reservedWording.In); w != "" {
		return nil, &relayRefusal{api.ReasonRelayRefusedWording, fmt.Sprintf("the schema at %s uses %q", at, w)}
	}
	names := slices.Sorted(maps.Keys(props))
	if !allowSecrets {
		if w := wording.Secret(p.Message); w != "" {
			return nil, &relayRefusal{api.ReasonRelayRefusedSecret, fmt.Sprintf("the message asks for a secret (%q)", w)}
		}
		if part, w := secretField("", schema); w != "" {
			return nil, &relayRefusal{api.ReasonRelayRefusedSecret, fmt.Sprintf("the form asks for a secret (%q in its %s)", w, part)}
		}
		for _, n := range names {
			if part, w := secretField(n, props[n]); w != "" {
				return nil, &relayRefusal{api.ReasonRelayRefusedSecret, fmt.Sprintf("field %q asks for a secret (%q in its %s)", n, w, part)}
			}
		}
	}
	if at := hiddenInSchema("", schema); at != "" {
		return nil, &relayRefusal{api.ReasonRelayRefusedWording, fmt.Sprintf("the schema at %s holds characters a person does not see", at)}
	}
	attr := attribution(server)
	out := &mcp.ElicitParams{Mode: p.Mode, Message: attr + visible.Text(p.Message)}
	if schema == nil {
		return out, nil
	}
	if err := attributeTexts(schema, attr, ""); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := attributeTexts(props[n], attr, n); err != nil {
			return nil, fmt.Errorf("field %q: %w", n, err)
		}
	}
	out.RequestedSchema = schema
	return out, nil
}

// formSchema decodes a form's requested schema afresh (the gateway changes
// its copy) and returns it with its properties; none for a form without a
// schema.
func formSchema(v any) (map[string]any, map[string]map[string]any, error) {
	if v == nil {
		return nil, nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("requested schema: %w", err)
	}
	var schema map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		return nil, nil, errors.New("requested schema is not an object")
	}
	props := map[string]map[string]any{}
	pv, ok := schema["properties"]
	if !ok || schema == nil {
		return schema, props, nil
	}
	pm, ok := pv.(map[string]any)
	if !ok {
		return nil, nil, errors.New("requested schema's properties are not an object")
	}
	for n, v := range pm {
		if props[n], ok = v.(map[string]any); !ok {
			return nil, nil, fmt.Errorf("property %q is not an object", n)
		}
	}
	return schema, props, nil
}

// attributeTexts puts attr before the title and the description of a schema
// object: the form's own, or a property's (name set), which gets its name
// as title when it has none, since that is what a host shows for it.
func attributeTexts(obj map[string]any, attr, name string) error {
	for _, k := range []string{"title", "description"} {
		v, ok := obj[k]
		if !ok {
			if k == "title" && name != "" {
				obj[k] = attr + visible.Text(name)
			}
			continue
		}
		s, isString := v.(string)
		if !isString {
			return fmt.Errorf("%s is not a string", k)
		}
		if s == "" && k == "title" && name != "" {
			s = name
		}
		obj[k] = attr + visible.Text(s)
	}
	return nil
}

// hiddenInSchema returns where in the schema v a string other than a title or a description
// holds a character a person does not see (visible.Count), or "". Titles and descriptions are
// shown marked (attributeTexts), and a field's name is shown as its title when it has none; an
// enumerated value or a default is shown, and answered, as the server wrote it, so one whose
// characters the host would not draw (a direction override that turns a reversed copy of the
// gateway's opening line around, a zero-width space that tells two choices apart) is not
// relayed.
func hiddenInSchema(at string, v any) string {
	shownMarked := func(k string, v any) bool {
		_, text := v.(string)
		return text && (k == "title" || k == "description") || k == "required" // or names, shown as titles
	}
	where, _ := findInSchema(at, v, false, shownMarked, func(s string) string {
		if visible.Count(s) > 0 {
			return "hidden"
		}
		return ""
	})
	return where
}

// findInSchema walks the decoded schema v, object members in name order,
// and returns where the first string for which find returns something is
// (at is v's own place), and what find returned; or "", "". With names,
// the members' names are strings too; a member for which skip reports
// true is passed over.
func findInSchema(at string, v any, names bool, skip func(k string, v any) bool, find func(string) string) (string, string) {
	switch t := v.(type) {
	case string:
		if w := find(t); w != "" {
			return at, w
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kat := strings.TrimPrefix(at+"."+k, ".")
			if names {
				if w := find(k); w != "" {
					return kat, w
				}
			}
			if skip != nil && skip(k, t[k]) {
				continue
			}
			if a, w := findInSchema(kat, t[k], names, skip, find); w != "" {
				return a, w
			}
		}
	case []any:
		for i, e := range t {
			if a, w := findInSchema(fmt.Sprintf("%s[%d]", at, i), e, names, skip, find); w != "" {
				return a, w
			}
		}
	}
	return "", ""
}

// secretField returns which part of a field (its name, title or
// description, or its format) asks for a secret, and the word, or "", "".
func secretField(name string, prop map[string]any) (string, string) {
	if w := wording.Secret(name); w != "" {
		return "name", w
	}
	for _, k := range []string{"title", "description"} {
		if s, ok := prop[k].(string); ok {
			if w := wording.Secret(s); w != "" {
				return k, w
			}
		}
	}
	if f, ok := prop["format"].(string); ok && wording.Same(f, "password") {
		return "format", "format: password"
	}
	return "", ""
}

// maxRelaySampling bounds one relayed sampling request, as JSON, and
// maxSamplingMessages the messages in it.
const (
	maxRelaySampling    = 256 << 10
	maxSamplingMessages = 64
)

// screenSampling returns the sampling request the host is sent for a
// server's p, or an error when it is not relayed: a request without
// messages, with more than maxSamplingMessages or larger than
// maxRelaySampling, or with content other than text, an image or audio.
// The system prompt starts with the server's attribution, as a relayed
// question's message does, and every text has the characters a host does
// not draw made visible (visible.Text), so that what the user reviews is
// what the model reads. No context is asked for (includeContext): the
// host's other servers are, to the host, the gateway, which stands for
// every server behind it, so "thisServer" would hand one server what the
// others returned. Only the request travels: the server's _meta and
// provider metadata are not passed on.
func screenSampling(server string, p *mcp.CreateMessageParams) (*mcp.CreateMessageParams, error) {
	if p == nil || len(p.Messages) == 0 {
		return nil, errors.New("no messages")
	}
	if len(p.Messages) > maxSamplingMessages {
		return nil, fmt.Errorf("%d messages", len(p.Messages))
	}
	if b, err := json.Marshal(p); err != nil || len(b) > maxRelaySampling {
		return nil, fmt.Errorf("sampling request larger than %d bytes", maxRelaySampling)
	}
	out := &mcp.CreateMessageParams{
		MaxTokens:        p.MaxTokens,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     strings.TrimSuffix(attribution(server)+visible.Text(p.SystemPrompt), " "),
		Temperature:      p.Temperature,
	}
	for i, m := range p.Messages {
		if m == nil {
			return nil, fmt.Errorf("message %d is null", i)
		}
		var c mcp.Content
		switch t := m.Content.(type) {
		case *mcp.TextContent:
			c = &mcp.TextContent{Text: visible.Text(t.Text)}
		case *mcp.ImageContent:
			c = &mcp.ImageContent{Data: t.Data, MIMEType: t.MIMEType}
		case *mcp.AudioContent:
			c = &mcp.AudioContent{Data: t.Data, MIMEType: t.MIMEType}
		default:
			return nil, fmt.Errorf("message %d holds %T", i, m.Content)
		}
		out.Messages = append(out.Messages, &mcp.SamplingMessage{Role: m.Role, Content: c})
	}
	return out, nil
}
