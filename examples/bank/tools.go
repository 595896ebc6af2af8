package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// knobs are the test switches that change how the server behaves. They
// exist so that clients can be tested against a real server that is slow,
// hangs, asks for more input, or changes its published definitions.
type knobs struct {
	delay         time.Duration // transfer sleeps this long before acting
	hang          bool          // transfer never answers
	inputRequired bool          // transfer answers input_required first
	schemaVariant int           // changes the published transfer definition
	noVerify      bool          // transfer's description carries no [Verify] label
	hide          string        // comma-separated tools not to publish
	ask           string        // a form elicitation get_balance asks first
}

// argSpec describes one argument the way the handler validates it. The
// published JSON Schemas say the same thing; TestSchemasMatchSpecs keeps
// the two in step.
type argSpec struct {
	name      string
	typ       string // "string" or "integer"
	required  bool
	format    string // "date-time" for strings
	minimum   int64  // integers: smallest accepted value
	maxLength int    // strings: 0 means the default cap
}

const defaultMaxLength = 64

var (
	transferArgs = []argSpec{
		{name: "from_account", typ: "string", required: true},
		{name: "to_account", typ: "string", required: true},
		{name: "amount", typ: "integer", required: true, minimum: 1},
		{name: "memo", typ: "string", maxLength: 140},
	}
	// schedule_transfer's are transfer's with when before memo.
	scheduleArgs = slices.Insert(slices.Clone(transferArgs), 3,
		argSpec{name: "when", typ: "string", required: true, format: "date-time"})
	balanceArgs = []argSpec{
		{name: "account", typ: "string", required: true},
	}
	listArgs = []argSpec{
		{name: "account", typ: "string"},
		{name: "limit", typ: "integer", minimum: 1},
	}
)

// transferSchema is the transfer input schema. Variants exist so tests can
// watch a definition digest change; variant 4 carries a number that no
// IEEE double denotes exactly, which a careful client must refuse to
// digest rather than round.
func transferSchema(variant int) string {
	head, amountExtra := "", ""
	switch variant {
	case 2:
		amountExtra = `, "maximum": 5000000`
	case 3:
		head = `"$schema": "http://json-schema.org/draft-07/schema#", `
	case 4:
		amountExtra = `, "maximum": 9007199254740993`
	}
	return `{` + head + `"type": "object",
  "properties": {
    "from_account": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Account to debit."},
    "to_account": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Account to credit."},
    "amount": {"type": "integer", "minimum": 1` + amountExtra + `, "description": "Amount in won."},
    "memo": {"type": "string", "maxLength": 140, "description": "Free text shown to the recipient."}
  },
  "required": ["from_account", "to_account", "amount"],
  "additionalProperties": false}`
}

// transferDescription is transfer's description. noVerify leaves out the
// [Verify] label: a provider that asks no approval of its own, so that only
// the policy decides whether the user approves a transfer.
func transferDescription(variant int, noVerify bool) string {
	d := "Move money from one account to another, immediately.\n" +
		"[Required] from_account\n"
	if !noVerify {
		d += "[Verify] confirm_transfer: The user confirms the recipient and the amount.\n"
	}
	d += "[Notice] Transfers are final."
	if variant == 1 {
		d += "\n[Notice] Transfers above 1,000,000 won are reported to the account owner."
	}
	return d
}

const scheduleSchema = `{"type": "object",
  "properties": {
    "from_account": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Account to debit."},
    "to_account": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Account to credit."},
    "amount": {"type": "integer", "minimum": 1, "description": "Amount in won."},
    "when": {"type": "string", "format": "date-time", "description": "When to execute, RFC 3339."},
    "memo": {"type": "string", "maxLength": 140, "description": "Free text shown to the recipient."}
  },
  "required": ["from_account", "to_account", "amount", "when"],
  "additionalProperties": false}`

const balanceSchema = `{"type": "object",
  "properties": {"account": {"type": "string", "minLength": 1, "maxLength": 64}},
  "required": ["account"],
  "additionalProperties": false}`

const listSchema = `{"type": "object",
  "properties": {
    "account": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Only transactions touching this account."},
    "limit": {"type": "integer", "minimum": 1, "description": "At most this many, newest first."}
  },
  "additionalProperties": false}`

// askFirst asks the client the form elicitation the file at path holds now:
// with an input_required result to a client of 2026-07-28 or later (its
// retry carries the answer), with elicitation/create to an older one. It
// returns what the client answered, or the input_required result to send.
func askFirst(ctx context.Context, req *mcp.CallToolRequest, path string) (string, *mcp.CallToolResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var form mcp.ElicitParams
	if err := json.Unmarshal(b, &form); err != nil {
		return "", nil, fmt.Errorf("--ask %s: %w", path, err)
	}
	told := func(a *mcp.ElicitResult) string {
		content, _ := json.Marshal(a.Content)
		return "answered " + a.Action + " " + string(content)
	}
	if ip := req.Session.InitializeParams(); ip == nil || ip.ProtocolVersion >= "2026-07-28" {
		if a, ok := req.Params.InputResponses["question"].(*mcp.ElicitResult); ok {
			return told(a), nil, nil
		}
		return "", &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"question": &form}, RequestState: "asked"}, nil
	}
	a, err := req.Session.Elicit(ctx, &form)
	if err != nil {
		return "not answered: " + err.Error(), nil, nil
	}
	return told(a), nil, nil
}

// bank is the tools' server: its ledger, its knobs, and which accounts each call may use.
type bank struct {
	l   *Ledger
	k   knobs
	acc access
}

// addTools registers the bank tools on srv, less the hidden ones; acc says
// which accounts each call may use.
func addTools(srv *mcp.Server, l *Ledger, k knobs, acc access) {
	b := &bank{l: l, k: k, acc: acc}
	hidden := strings.Split(k.hide, ",")
	for _, t := range []struct {
		tool    *mcp.Tool
		handler mcp.ToolHandler
	}{
		{&mcp.Tool{
			Name:        "transfer",
			Description: transferDescription(k.schemaVariant, k.noVerify),
			InputSchema: json.RawMessage(transferSchema(k.schemaVariant)),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		}, b.transfer},
		{&mcp.Tool{
			Name: "schedule_transfer",
			Description: "Schedule a transfer for a later time.\n" +
				"[Required] from_account\n" +
				"[Verify] confirm_schedule: The user confirms the recipient, the amount and the time.\n" +
				"[Notice] A scheduled transfer runs at the given time without asking again.",
			InputSchema: json.RawMessage(scheduleSchema),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		}, b.schedule},
		{&mcp.Tool{
			Name:        "get_balance",
			Description: "Read the current balance of an account.",
			InputSchema: json.RawMessage(balanceSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
		}, b.balance},
		{&mcp.Tool{
			Name:        "list_transactions",
			Description: "List transactions, newest first.",
			InputSchema: json.RawMessage(listSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
		}, b.list},
	} {
		if !slices.Contains(hidden, t.tool.Name) {
			srv.AddTool(t.tool, t.handler)
		}
	}
}

// begin parses req's arguments against specs, finds its actor and checks that the actor may
// use the account the argument key names, when the call names one (list_transactions' is
// optional). A non-nil answer (invalid arguments, no actor, another's account) is the call's.
func (b *bank) begin(req *mcp.CallToolRequest, specs []argSpec, key string) (args map[string]any, actor, account string, answer *mcp.CallToolResult) {
	args, err := parseArgs(req.Params.Arguments, specs)
	if err != nil {
		return nil, "", "", toolError("invalid arguments: %v", err)
	}
	if actor, answer = b.acc.actor(req); answer != nil {
		return nil, "", "", answer
	}
	if account = str(args[key]); account != "" && !b.acc.owns(actor, account) {
		return nil, "", "", notYours(actor, account)
	}
	return args, actor, account, nil
}

// transfer moves money at once.
func (b *bank) transfer(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, actor, from, answer := b.begin(req, transferArgs, "from_account")
	if answer != nil {
		return answer, nil
	}
	if b.k.inputRequired && len(req.Params.InputResponses) == 0 {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: "Confirm this transfer?",
			}},
			RequestState: "unsigned-demo-state",
		}, nil
	}
	if b.k.inputRequired {
		// This example keeps no server-side record of the state it
		// handed out, so it cannot tell an honest answer from a forged
		// one: it refuses rather than act on it.
		return toolError("confirmation answers are not accepted by this server"), nil
	}
	if err := pause(ctx, b.k); err != nil {
		return nil, err
	}
	tx, after, err := b.l.Transfer(ctx, Transaction{From: from, To: args["to_account"].(string),
		Amount: args["amount"].(int64), Memo: str(args["memo"]), Actor: actor})
	if err != nil {
		return failure(err)
	}
	return structured(fmt.Sprintf("transferred %d from %s to %s (%s)", tx.Amount, tx.From, tx.To, tx.ID),
		map[string]any{"transaction_id": tx.ID, "from_account": tx.From, "to_account": tx.To,
			"amount": tx.Amount, "balance_after": after})
}

// schedule records a transfer for a later time.
func (b *bank) schedule(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, actor, from, answer := b.begin(req, scheduleArgs, "from_account")
	if answer != nil {
		return answer, nil
	}
	tx, _, err := b.l.Transfer(ctx, Transaction{From: from, To: args["to_account"].(string),
		Amount: args["amount"].(int64), Memo: str(args["memo"]), When: args["when"].(string), Actor: actor})
	if err != nil {
		return failure(err)
	}
	return structured(fmt.Sprintf("scheduled %d from %s to %s at %s (%s)", tx.Amount, tx.From, tx.To, tx.When, tx.ID),
		map[string]any{"transaction_id": tx.ID, "from_account": tx.From, "to_account": tx.To,
			"amount": tx.Amount, "when": tx.When, "status": tx.Status})
}

// balance reads an account's balance, after asking the --ask form first when there is one.
func (b *bank) balance(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_, _, account, answer := b.begin(req, balanceArgs, "account")
	if answer != nil {
		return answer, nil
	}
	told := ""
	if b.k.ask != "" {
		t, ir, err := askFirst(ctx, req, b.k.ask)
		if ir != nil || err != nil {
			return ir, err
		}
		told = t + "; "
	}
	var balance int64
	err := b.l.View(func(st *State) error {
		a, ok := st.Accounts[account]
		if !ok {
			return &Failure{fmt.Sprintf("unknown account %q", account)}
		}
		balance = a.Balance
		return nil
	})
	if err != nil {
		return failure(err)
	}
	return structured(fmt.Sprintf("%sbalance of %s: %d", told, account, balance),
		map[string]any{"account": account, "balance": balance})
}

// list lists the transactions the actor may see, newest first.
func (b *bank) list(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, actor, account, answer := b.begin(req, listArgs, "account")
	if answer != nil {
		return answer, nil
	}
	limit := int64(100)
	if v, ok := args["limit"].(int64); ok {
		limit = v
	}
	txs := []Transaction{}
	err := b.l.View(func(st *State) error {
		if _, ok := st.Accounts[account]; account != "" && !ok {
			return &Failure{fmt.Sprintf("unknown account %q", account)}
		}
		for i := len(st.Transactions) - 1; i >= 0 && int64(len(txs)) < limit; i-- {
			tx := st.Transactions[i]
			switch {
			case account != "" && tx.From != account && tx.To != account:
				continue
			case !b.acc.owns(actor, tx.From) && !b.acc.owns(actor, tx.To):
				continue // neither side is the actor's
			case b.acc.signedIn && tx.Actor != actor:
				tx.Actor = "" // money another user sent: who they are is theirs
			}
			txs = append(txs, tx)
		}
		return nil
	})
	if err != nil {
		return failure(err)
	}
	return structured(fmt.Sprintf("%d transactions", len(txs)), map[string]any{"transactions": txs})
}

// pause applies the delay and hang knobs, giving up when the caller does.
func pause(ctx context.Context, k knobs) error {
	if k.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if k.delay > 0 {
		select {
		case <-time.After(k.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func toolError(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}},
	}
}

// failure turns a business refusal into an isError result; anything else
// (a broken state file, a cancelled call) is a protocol error.
func failure(err error) (*mcp.CallToolResult, error) {
	if f, ok := errors.AsType[*Failure](err); ok {
		return toolError("%s", f.Msg), nil
	}
	return nil, err
}

func structured(text string, v map[string]any) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: v,
	}, nil
}

// parseArgs validates raw tool arguments against specs: a JSON object, no
// duplicate or unknown keys, every required key present, each value of
// its declared type. Strings come back as string, integers as int64.
func parseArgs(raw json.RawMessage, specs []argSpec) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("arguments: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	bySpec := make(map[string]argSpec, len(specs))
	for _, s := range specs {
		bySpec[s.name] = s
	}
	out := make(map[string]any, len(specs))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		key := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		spec, ok := bySpec[key]
		if !ok {
			return nil, fmt.Errorf("unknown argument %q", key)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("duplicate argument %q", key)
		}
		v, err := spec.parse(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil { // closing brace
		return nil, fmt.Errorf("arguments: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("arguments: trailing data")
	}
	for _, s := range specs {
		if _, ok := out[s.name]; s.required && !ok {
			return nil, fmt.Errorf("missing required argument %q", s.name)
		}
	}
	return out, nil
}

func (s argSpec) parse(val json.RawMessage) (any, error) {
	switch s.typ {
	case "string":
		if len(val) == 0 || val[0] != '"' {
			return nil, errors.New("must be a string")
		}
		var v string
		if err := json.Unmarshal(val, &v); err != nil {
			return nil, err
		}
		max := cmp.Or(s.maxLength, defaultMaxLength)
		if n := utf8.RuneCountInString(v); n > max {
			return nil, fmt.Errorf("longer than %d characters", max)
		}
		if s.required && strings.TrimSpace(v) == "" {
			return nil, errors.New("must not be empty")
		}
		if s.format == "date-time" {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return nil, errors.New("must be an RFC 3339 date-time")
			}
		}
		return v, nil
	case "integer":
		if len(val) == 0 || (val[0] != '-' && (val[0] < '0' || val[0] > '9')) {
			return nil, errors.New("must be an integer")
		}
		var n json.Number
		if err := json.Unmarshal(val, &n); err != nil {
			return nil, errors.New("must be an integer")
		}
		// JSON Schema counts 5.0 and 5e2 as integers; so does this check.
		f, _, err := big.ParseFloat(n.String(), 10, 256, big.ToNearestEven)
		if err != nil || !f.IsInt() {
			return nil, errors.New("must be an integer")
		}
		i, acc := f.Int64()
		if acc != big.Exact {
			return nil, errors.New("out of range")
		}
		if i < s.minimum {
			return nil, fmt.Errorf("must be at least %d", s.minimum)
		}
		return i, nil
	}
	return nil, fmt.Errorf("unsupported type %q", s.typ)
}
