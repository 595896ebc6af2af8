package vault

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestPutIfUnchanged: a refresh stored over the grant it read goes in, keeping the id and
// creation time; one stored over a grant that has changed since, been revoked or been
// tampered with does not, and leaves what is stored as it is. RevokeIfUnchanged the same.
func TestPutIfUnchanged(t *testing.T) { eachBackend(t, testPutIfUnchanged) }

func testPutIfUnchanged(t *testing.T, open opener) {
	ctx := context.Background()
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	clock := newTestClock()
	v := open([]*Key{k}, Options{Now: clock.Now})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	read, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	refreshed := func(from Grant, token string) Grant {
		from.AccessToken, from.Expiry = token, clock.Now().Add(time.Hour)
		return from
	}

	clock.Advance(time.Minute)
	if err := v.PutIfUnchanged(ctx, read, refreshed(read, "at-first")); err != nil {
		t.Fatal(err)
	}
	first, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	if first.AccessToken != "at-first" || first.ID != read.ID || !first.Created.Equal(read.Created) || !first.Updated.Equal(clock.Now()) {
		t.Fatalf("after a refresh: %#v", first)
	}

	// Every refusal leaves the stored grant as it is.
	unchanged := func(what string) {
		t.Helper()
		got, err := v.Get(ctx, "alice", "files")
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("%s changed the stored grant: %v %v", what, got, err)
		}
	}
	if err := v.PutIfUnchanged(ctx, read, refreshed(read, "at-second")); !errors.Is(err, ErrChanged) {
		t.Fatalf("a refresh over a grant refreshed since: %v, want ErrChanged", err)
	}
	unchanged("a refresh over a grant refreshed since")
	if err := v.RevokeIfUnchanged(ctx, read); !errors.Is(err, ErrChanged) {
		t.Fatalf("a revoke of a grant refreshed since: %v, want ErrChanged", err)
	}
	unchanged("a revoke of a grant refreshed since")
	// A grant the same in all but one field is another grant.
	almost := first
	almost.Scopes = []string{"read"}
	if err := v.PutIfUnchanged(ctx, almost, refreshed(first, "at-second")); !errors.Is(err, ErrChanged) {
		t.Fatalf("a refresh over a grant with other scopes: %v, want ErrChanged", err)
	}
	unchanged("a refresh over a grant with other scopes")
	for _, tc := range []struct {
		name string
		next Grant
	}{
		{"of another principal", func() Grant { g := refreshed(first, "at-x"); g.Principal = "bob"; return g }()},
		{"of another server", func() Grant { g := refreshed(first, "at-x"); g.Server = "mail"; return g }()},
		{"breaking a rule", refreshed(first, "at\nx")},
	} {
		if err := v.PutIfUnchanged(ctx, first, tc.next); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a refresh %s: %v, want ErrInvalid", tc.name, err)
		}
		unchanged("a refresh " + tc.name)
	}

	// A grant whose record was changed is neither replaced nor removed this way.
	good := raw(t, v, "alice", "files")
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	setRaw(t, v, "alice", "files", bad)
	if err := v.PutIfUnchanged(ctx, first, refreshed(first, "at-second")); !errors.Is(err, ErrTampered) {
		t.Fatalf("a refresh over a tampered record: %v, want ErrTampered", err)
	}
	if err := v.RevokeIfUnchanged(ctx, first); !errors.Is(err, ErrTampered) {
		t.Fatalf("a revoke of a tampered record: %v, want ErrTampered", err)
	}
	setRaw(t, v, "alice", "files", good)

	if err := v.RevokeIfUnchanged(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Get(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("after RevokeIfUnchanged: %v, want ErrNoGrant", err)
	}
	// A refresh of a grant revoked meanwhile does not bring it back.
	if err := v.PutIfUnchanged(ctx, first, refreshed(first, "at-second")); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("a refresh of a revoked grant: %v, want ErrNoGrant", err)
	}
	if err := v.RevokeIfUnchanged(ctx, first); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("a second RevokeIfUnchanged: %v, want ErrNoGrant", err)
	}
	if _, err := v.Get(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("after a refresh of a revoked grant: %v, want ErrNoGrant", err)
	}
}

// TestSame: same tells apart two grants that differ in any one field, so a field added to
// Grant and forgotten there fails here.
func TestSame(t *testing.T) {
	base := sampleGrant("alice", "files")
	base.ID, base.Created, base.Updated = newID(), time.Unix(1_800_000_000, 0), time.Unix(1_800_000_100, 0)
	if !base.same(base) {
		t.Fatal("a grant is not the same as itself")
	}
	moved := base
	moved.Expiry = base.Expiry.In(time.FixedZone("x", 3600))
	if !base.same(moved) {
		t.Fatal("the same expiry in another zone reads as another grant")
	}
	rv := reflect.ValueOf(&base).Elem()
	for i := range rv.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Slice:
			f.Set(reflect.ValueOf(append([]string{"extra"}, base.Scopes...)))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(f.Interface().(time.Time).Add(time.Nanosecond)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", rv.Type().Field(i).Name, f.Kind())
		}
		if base.same(other) {
			t.Errorf("grants differing in %s read as the same", rv.Type().Field(i).Name)
		}
	}
}
