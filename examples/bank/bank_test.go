package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		specs   []argSpec
		args    string
		wantErr string // substring; "" means accepted
	}{
		{"valid transfer", transferArgs, `{"from_account":"a","to_account":"b","amount":5}`, ""},
		{"valid with memo", transferArgs, `{"from_account":"a","to_account":"b","amount":5,"memo":"rent"}`, ""},
		{"integer-valued number", transferArgs, `{"from_account":"a","to_account":"b","amount":5.0}`, ""},
		{"amount as string", transferArgs, `{"from_account":"a","to_account":"b","amount":"5"}`, "amount: must be an integer"},
		{"amount fractional", transferArgs, `{"from_account":"a","to_account":"b","amount":1.5}`, "amount: must be an integer"},
		{"amount boolean", transferArgs, `{"from_account":"a","to_account":"b","amount":true}`, "amount: must be an integer"},
		{"amount null", transferArgs, `{"from_account":"a","to_account":"b","amount":null}`, "amount: must be an integer"},
		{"amount zero", transferArgs, `{"from_account":"a","to_account":"b","amount":0}`, "at least 1"},
		{"amount negative", transferArgs, `{"from_account":"a","to_account":"b","amount":-5}`, "at least 1"},
		{"amount beyond int64", transferArgs, `{"from_account":"a","to_account":"b","amount":9223372036854775808}`, "out of range"},
		{"account as number", transferArgs, `{"from_account":1102534471,"to_account":"b","amount":5}`, "from_account: must be a string"},
		{"account empty", transferArgs, `{"from_account":" ","to_account":"b","amount":5}`, "must not be empty"},
		{"unknown argument", transferArgs, `{"from_account":"a","to_account":"b","amount":5,"dry_run":true}`, `unknown argument "dry_run"`},
		{"duplicate argument", transferArgs, `{"from_account":"a","to_account":"b","amount":5,"amount":6}`, `duplicate argument "amount"`},
		{"missing required", transferArgs, `{"from_account":"a","amount":5}`, `missing required argument "to_account"`},
		{"not an object", transferArgs, `["a","b",5]`, "must be a JSON object"},
		{"trailing data", transferArgs, `{"from_account":"a","to_account":"b","amount":5} {}`, "trailing data"},
		{"memo too long", transferArgs, `{"from_account":"a","to_account":"b","amount":5,"memo":"` + strings.Repeat("x", 141) + `"}`, "longer than 140"},
		{"valid schedule", scheduleArgs, `{"from_account":"a","to_account":"b","amount":5,"when":"2026-12-01T09:00:00Z"}`, ""},
		{"bad date-time", scheduleArgs, `{"from_account":"a","to_account":"b","amount":5,"when":"tomorrow"}`, "RFC 3339"},
		{"empty arguments, nothing required", listArgs, ``, ""},
		{"empty arguments, something required", balanceArgs, ``, "missing required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseArgs(json.RawMessage(tt.args), tt.specs)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("accepted, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestSchemasMatchSpecs keeps the published schemas and the handler's own
// validation in step.
func TestSchemasMatchSpecs(t *testing.T) {
	type schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional *bool                      `json:"additionalProperties"`
	}
	cases := map[string]struct {
		schema string
		specs  []argSpec
	}{
		"transfer":           {transferSchema(0), transferArgs},
		"transfer variant 2": {transferSchema(2), transferArgs},
		"transfer variant 3": {transferSchema(3), transferArgs},
		"transfer variant 4": {transferSchema(4), transferArgs},
		"schedule_transfer":  {scheduleSchema, scheduleArgs},
		"get_balance":        {balanceSchema, balanceArgs},
		"list_transactions":  {listSchema, listArgs},
	}
	for name, c := range cases {
		var s schema
		if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Type != "object" || s.Additional == nil || *s.Additional {
			t.Errorf("%s: want type object and additionalProperties false", name)
		}
		var props, required []string
		for _, sp := range c.specs {
			props = append(props, sp.name)
			if sp.required {
				required = append(required, sp.name)
			}
			var p struct {
				Type string `json:"type"`
			}
			json.Unmarshal(s.Properties[sp.name], &p)
			if p.Type != sp.typ {
				t.Errorf("%s: %s has type %q in the schema, %q in the handler", name, sp.name, p.Type, sp.typ)
			}
		}
		var got []string
		for k := range s.Properties {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(props)
		slices.Sort(required)
		slices.Sort(s.Required)
		if !slices.Equal(got, props) || !slices.Equal(s.Required, required) {
			t.Errorf("%s: schema properties %v required %v; handler %v required %v", name, got, s.Required, props, required)
		}
	}
}

func TestLedgerTransfer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, after, err := l.Transfer(ctx, Transaction{From: "1102534471", To: "110-222-333", Amount: 500_000, Memo: "rent"}); err != nil || after != 1_500_000 {
		t.Fatalf("transfer: balance after %d, err %v", after, err)
	}
	var f *Failure
	if _, _, err := l.Transfer(ctx, Transaction{From: "1102534471", To: "110-222-333", Amount: 1_500_001}); !errors.As(err, &f) {
		t.Fatalf("overdraft: err %v, want a Failure", err)
	}
	if _, _, err := l.Transfer(ctx, Transaction{From: "1102534471", To: "999", Amount: 1}); !errors.As(err, &f) {
		t.Fatalf("unknown account: err %v, want a Failure", err)
	}
	// A second ledger on the same file sees the first one's writes.
	l2, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	l2.View(func(st *State) error {
		if st.Accounts["110-222-333"].Balance != 500_000 || len(st.Transactions) != 1 {
			t.Errorf("reopened ledger: %+v, %d transactions", st.Accounts["110-222-333"], len(st.Transactions))
		}
		return nil
	})
}

func FuzzParseArgs(f *testing.F) {
	f.Add([]byte(`{"from_account":"a","to_account":"b","amount":5}`))
	f.Add([]byte(`{"from_account":"a","to_account":"b","amount":1e3,"memo":"\u00e9"}`))
	f.Add([]byte(`{"amount":"5","amount":5}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := parseArgs(raw, transferArgs)
		if err != nil {
			return
		}
		if _, ok := out["amount"].(int64); !ok {
			t.Fatalf("accepted without an integer amount: %q", raw)
		}
		for _, k := range []string{"from_account", "to_account"} {
			if _, ok := out[k].(string); !ok {
				t.Fatalf("accepted without string %s: %q", k, raw)
			}
		}
		if !json.Valid(raw) && len(strings.TrimSpace(string(raw))) > 0 {
			t.Fatalf("accepted invalid JSON: %q", raw)
		}
	})
}
