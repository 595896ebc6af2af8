package gates

import (
	"testing"

	"github.com/verdictgate/verdict/policy"
)

func TestAskValue(t *testing.T) {
	tests := []struct {
		name  string
		field *policy.Field
		prop  *property
		want  string
	}{
		{"policy question first", &policy.Field{Question: "Which account should the money go to?"},
			&property{title: "Recipient"}, "Which account should the money go to?"},
		{"title", nil, &property{title: "Recipient account"}, "What is the recipient account?"},
		{"title with an article", nil, &property{title: "The IBAN"}, "What is the IBAN?"},
		{"description", nil, &property{description: "The account number to send money to."},
			"Please give the account number to send money to."},
		{"description, first line only", nil, &property{description: "Amount in won.\nMust be positive."},
			"Please give the amount in won."},
		{"a description holding labels is not quoted", nil, &property{description: "[Required] the amount"},
			`What value should "to_account" have?`},
		{"no words: the name, exactly", nil, &property{}, `What value should "to_account" have?`},
		{"no definition", nil, nil, `What value should "to_account" have?`},
	}
	for _, tt := range tests {
		if got := askValue(tt.field, tt.prop, "to_account"); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAskConfirm(t *testing.T) {
	tests := []struct {
		prop *property
		want string
	}{
		{&property{title: "Recipient account"}, "Please confirm the recipient account."},
		{&property{description: "The account number to send money to."}, "Please confirm the account number to send money to."},
		{&property{}, `Please confirm the value of "to_account".`},
		{nil, `Please confirm the value of "to_account".`},
	}
	for _, tt := range tests {
		if got := askConfirm(tt.prop, "to_account"); got != tt.want {
			t.Errorf("askConfirm(%+v) = %q, want %q", tt.prop, got, tt.want)
		}
	}
}
