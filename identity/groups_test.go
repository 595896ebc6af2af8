package identity

import (
	"encoding/json"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestReadGroups: the groups claim is one string or an array of strings, read exactly as
// written (no case folding, no splitting, no trimming), so that a policy's group matches only
// the group the provider named; any other shape refuses the whole token (token_malformed)
// rather than yielding some groups.
func TestReadGroups(t *testing.T) {
	v := &Verifier{groups: "groups"}
	is := &issuer{cfg: Issuer{Issuer: "https://op.test"}}
	for _, tc := range []struct {
		name    string
		payload string
		want    []string
		refused bool
	}{
		{"absent", `{"sub":"a"}`, nil, false},
		{"null", `{"groups":null}`, nil, false},
		{"one string", `{"groups":"payments-approvers"}`, []string{"payments-approvers"}, false},
		{"a string with spaces is one group", `{"groups":"payments-approvers admins"}`, []string{"payments-approvers admins"}, false},
		{"an array", `{"groups":["a","payments-approvers"]}`, []string{"a", "payments-approvers"}, false},
		{"case kept", `{"groups":["Payments-Approvers"]}`, []string{"Payments-Approvers"}, false},
		{"white space kept", `{"groups":[" payments-approvers"]}`, []string{" payments-approvers"}, false},
		{"an empty array", `{"groups":[]}`, []string{}, false},
		{"an object", `{"groups":{"payments-approvers":true}}`, nil, true},
		{"a nested array", `{"groups":[["payments-approvers"]]}`, nil, true},
		{"a number among strings", `{"groups":["payments-approvers",1]}`, nil, true},
		{"a null among strings", `{"groups":["payments-approvers",null]}`, nil, true},
		{"a boolean", `{"groups":true}`, nil, true},
		{"a number", `{"groups":1}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.readGroups(is, []byte(tc.payload))
			if tc.refused {
				if ReasonOf(err) != TokenMalformed || got != nil {
					t.Fatalf("groups %q, err %v; want token_malformed", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("groups %q, err %v; want %q", got, err, tc.want)
			}
		})
	}
	// Another claim name reads that claim only.
	roles := &Verifier{groups: "roles"}
	if got, err := roles.readGroups(is, []byte(`{"groups":["payments-approvers"],"roles":["viewer"]}`)); err != nil || !slices.Equal(got, []string{"viewer"}) {
		t.Errorf("roles claim: %q, %v", got, err)
	}
}

// TestReadGroupsProperty: whatever the claim holds, the groups read are exactly its strings
// (one, or each of an array) or the token is refused: no group is ever made up.
func TestReadGroupsProperty(t *testing.T) {
	v := &Verifier{groups: "groups"}
	is := &issuer{cfg: Issuer{Issuer: "https://op.test"}}
	leaf := rapid.OneOf(
		rapid.Just[any](nil), rapid.Bool().AsAny(), rapid.Float64().AsAny(), rapid.String().AsAny(),
		rapid.Just[any](map[string]any{"payments-approvers": true}),
	)
	claim := rapid.OneOf(leaf, rapid.SliceOf(leaf).AsAny(), rapid.SliceOf(rapid.String()).AsAny())
	rapid.Check(t, func(rt *rapid.T) {
		c := claim.Draw(rt, "claim")
		payload, err := json.Marshal(map[string]any{"groups": c})
		if err != nil {
			rt.Skip()
		}
		got, err := v.readGroups(is, payload)
		var back any
		_ = json.Unmarshal(payload, &back)
		c = back.(map[string]any)["groups"]
		var want []string
		ok := true
		switch x := c.(type) {
		case nil:
		case string:
			want = []string{x}
		case []any:
			want = []string{}
			for _, e := range x {
				s, isStr := e.(string)
				ok = ok && isStr
				want = append(want, s)
			}
		default:
			ok = false
		}
		if !ok {
			if err == nil || got != nil {
				rt.Fatalf("claim %#v: groups %q, err %v; want a refusal", c, got, err)
			}
			return
		}
		if err != nil || !slices.Equal(got, want) {
			rt.Fatalf("claim %#v: groups %q, err %v; want %q", c, got, err, want)
		}
	})
}
