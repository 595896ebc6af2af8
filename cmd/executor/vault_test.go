package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/vault"
)

// writeAgeKey writes a fresh age identity to dir/name as age-keygen does, mode 0600.
func writeAgeKey(t *testing.T, dir, name string) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVaultRekey: a grant written under the old key is re-encrypted to the new one, and a
// second run has nothing left to do; the old key can then go.
func TestVaultRekey(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := writeAgeKey(t, dir, "old.key"), writeAgeKey(t, dir, "new.key")
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(keyFiles ...string) *vault.Vault {
		var ks []*vault.Key
		for _, f := range keyFiles {
			k, err := vault.LoadKey(f)
			if err != nil {
				t.Fatal(err)
			}
			ks = append(ks, k)
		}
		v, err := vault.Open(filepath.Join(data, executor.DBFile), ks, vault.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := put(oldKey)
	if err := v.Put(context.Background(), vault.Grant{Principal: "alice", Server: "github", Kind: vault.KindUserGrant, AccessToken: "at"}); err != nil {
		t.Fatal(err)
	}
	v.Close()

	cfg := map[string]any{
		"listen": "127.0.0.1:0", "data_dir": data, "executor_id": "x",
		"trusted_issuers": []map[string]string{{"issuer": "verdictd", "jwks": "jwks.json"}}, "receipt_key": "r.jwk",
		"servers":  map[string]any{"github": map[string]any{"url": "https://api.github.test/mcp"}},
		"callers":  []map[string]string{{"name": "gate", "token_sha256": httpx.HashToken("t")}},
		"identity": map[string]any{"issuers": []map[string]any{{"issuer": "https://idp.test", "audience": "https://gw.test/mcp"}}},
		"credentials": map[string]any{"github": map[string]any{"mode": "user_grant", "registration": "dynamic",
			"subject_issuer": "https://idp.test"}},
		"vault":   map[string]any{"key_files": []string{newKey, oldKey}},
		"connect": map[string]any{"public_url": "https://executor.test", "sign_in": map[string]any{"issuer": "https://idp.test", "client_id": "c"}},
	}
	b, _ := json.Marshal(cfg)
	config := filepath.Join(dir, "executor.yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"1 grants re-encrypted", "0 grants re-encrypted"} {
		var out, errs bytes.Buffer
		if code := run([]string{"vault", "rekey", "--config", config}, &out, &errs); code != 0 || !strings.HasPrefix(out.String(), want) {
			t.Fatalf("run %d: exit %d, %q %q, want %q", i, code, out.String(), errs.String(), want)
		}
	}
	v = put(newKey) // the old key gone: the grant opens with the new one alone
	defer v.Close()
	if _, err := v.Get(context.Background(), "alice", "github"); err != nil {
		t.Fatal(err)
	}
}
