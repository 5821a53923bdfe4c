package tenancy

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/testwait"
)

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

func TestLoadKEK(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "signing.kek")
	if _, err := LoadKEK(path, false); err == nil {
		t.Fatal("missing file without create: got nil error")
	}
	k1, err := LoadKEK(path, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode: got %v, %v; want 0600", st.Mode().Perm(), err)
	}
	k2, err := LoadKEK(path, true)
	if err != nil || string(k1) != string(k2) || len(k1) != KEKSize {
		t.Fatalf("reload: got %x, %v; want %x", k2, err, k1)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKEK(path, false); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("world-readable kek: got %v, want ErrInvalidKey", err)
	}
	bad := filepath.Join(dir, "bad.kek")
	if err := writeFile(bad, []byte("abcd\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKEK(bad, false); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("short kek: got %v, want ErrInvalidKey", err)
	}
}

func TestKeyRingBootstrapAndJWKS(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	keys := f.ring.Keys()
	if len(keys) != 2 || keys[0].State != KeyCurrent || keys[1].State != KeyNext {
		t.Fatalf("first start: got %+v, want one current and one next key", keys)
	}
	// A second process opening the same issuer sees the same keys and
	// makes none.
	again, err := OpenKeyRing(ctx, f.store, f.ring.Issuer(), f.kek, WithMinRotateInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	if k2 := again.Keys(); len(k2) != 2 || k2[0].ID != keys[0].ID || k2[1].ID != keys[1].ID {
		t.Fatalf("reopen: got %+v, want %+v", k2, keys)
	}
	// The wrong key-encryption key opens nothing.
	wrong := make([]byte, KEKSize)
	if _, err := OpenKeyRing(ctx, f.store, f.ring.Issuer(), wrong, WithMinRotateInterval(0)); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("wrong kek: got %v, want ErrInvalidKey", err)
	}
	// JWKS: RFC 8037 OKP keys, kid = RFC 7638 thumbprint, both verifying keys.
	set := f.ring.JWKS()
	if len(set.Keys) != 2 {
		t.Fatalf("jwks: got %d keys, want 2", len(set.Keys))
	}
	for i, k := range set.Keys {
		x, _ := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" || k.D != "" ||
			k.Kid != keys[i].ID || Thumbprint(ed25519.PublicKey(x)) != k.Kid {
			t.Fatalf("jwks key %d: got %+v", i, k)
		}
	}
	ks, err := ParseJWKS("https://other", mustJSON(t, set))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ks.PublicKey(keys[0].ID); !ok {
		t.Fatal("the ring's own JWKS does not parse back")
	}
}

// RFC 7638 §3.1 gives no Ed25519 example; RFC 8037 §A.3 does.
func TestThumbprintRFC8037(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got, want := Thumbprint(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Rotation: next and current overlap, so a verifier that has not reloaded
// still accepts tokens of the newly current key; previous keeps verifying
// for one rotation; retired keys stop verifying — at once where retired,
// after Reload elsewhere.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	// Another process's view: its own ring and verifier over the same keys.
	remoteRing, err := OpenKeyRing(ctx, f.store, f.ring.Issuer(), f.kek, WithMinRotateInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	remote, err := NewVerifier(VerifierConfig{Audience: testAudience, Sources: []KeySource{remoteRing}, Tenants: f.store})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(v *Verifier, tok string) error { _, err := v.Verify(ctx, tok); return err }

	k0 := f.ring.Keys()
	tok0, err := f.issuer.Issue(f.request())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	k1 := f.ring.Keys()
	if len(k1) != 3 || k1[0].State != KeyPrevious || k1[1].State != KeyCurrent || k1[1].ID != k0[1].ID || k1[2].State != KeyNext {
		t.Fatalf("after one rotation: got %+v", k1)
	}
	tok1, err := f.issuer.Issue(f.request())
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*Verifier{"local": f.verifier, "remote before reload": remote} {
		if err := verify(v, tok0); err != nil {
			t.Errorf("%s: token of the previous key: %v", name, err)
		}
		// remote has not reloaded: it knows the new current key as next.
		if err := verify(v, tok1); err != nil {
			t.Errorf("%s: token of the new current key: %v", name, err)
		}
	}
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := verify(f.verifier, tok0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key after two rotations: got %v, want ErrUnknownKey", err)
	}
	if err := verify(f.verifier, tok1); err != nil {
		t.Fatalf("previous key after two rotations: %v", err)
	}
	if err := remoteRing.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := verify(remote, tok0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("remote after reload: got %v, want ErrUnknownKey", err)
	}
	// Retire the previous key early (suspected compromise).
	if err := f.ring.Retire(ctx, k1[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := verify(f.verifier, tok1); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("explicitly retired key: got %v, want ErrUnknownKey", err)
	}
	for _, k := range f.ring.JWKS().Keys {
		if k.Kid == k0[0].ID || k.Kid == k1[1].ID {
			t.Fatalf("jwks still publishes retired key %s", k.Kid)
		}
	}
	cur, _, _ := f.ring.signer()
	if err := f.ring.Retire(ctx, cur); !errors.Is(err, ErrConflict) {
		t.Fatalf("retire current: got %v, want ErrConflict", err)
	}
	if err := f.ring.Retire(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retire unknown: got %v, want ErrNotFound", err)
	}
	// Retiring next then rotating still leaves a current and a next key.
	for _, k := range f.ring.Keys() {
		if k.State == KeyNext {
			if err := f.ring.Retire(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	states := map[KeyState]int{}
	for _, k := range f.ring.Keys() {
		states[k.State]++
	}
	if states[KeyCurrent] != 1 || states[KeyNext] != 1 || states[KeyPrevious] != 1 {
		t.Fatalf("states after rotate with no next: got %v", states)
	}
	if _, err := f.issuer.Issue(f.request()); err != nil {
		t.Fatal(err)
	}
}

// The database refuses to move a key backwards, even for the runtime role.
func TestKeysOneWay(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	prev := f.ring.Keys()[0]
	// The runtime role may only write through row_apply, and the row's
	// trigger holds there too.
	var sealed []byte
	if err := db.RuntimePool(t).QueryRow(ctx, `SELECT sealed_private FROM signing_keys WHERE kid = $1`, prev.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	row := keyRow{Kid: prev.ID, Issuer: prev.Issuer, Algorithm: "EdDSA", PublicKey: `\x` + hex.EncodeToString(prev.Public),
		SealedPrivate: `\x` + hex.EncodeToString(sealed), State: string(KeyNext)}
	err := forgeRow(t, db.RuntimePool(t), audit.RowSigningKeys, prev.ID, "", row, func(d *audit.Digest) audit.Payload {
		p := keyEvent(audit.KeyRotated, prev.ID, prev.Public)
		p.State = d
		return p
	})
	if err := translate(err, "key"); !errors.Is(err, ErrConflict) {
		t.Fatalf("previous → next: got %v, want ErrConflict", err)
	}
}

// RotateIfOlder rotates once per age, however many processes ask at once.
func TestRotateIfOlder(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	if done, err := f.ring.RotateIfOlder(ctx, time.Hour); err != nil || done {
		t.Fatalf("fresh key: got rotated=%v, %v; want no rotation", done, err)
	}
	// Age the current key by two hours (as the admin: the runtime role may
	// set activated_at only through a rotation).
	cur, _, _ := f.ring.signer()
	if _, err := db.AdminPool(t).Exec(ctx, `UPDATE signing_keys SET activated_at = activated_at - interval '2 hours' WHERE kid = $1`, cur); err != nil {
		t.Fatal(err)
	}
	var rotations atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ring, err := OpenKeyRing(ctx, f.store, f.ring.Issuer(), f.kek, WithMinRotateInterval(0))
			if err != nil {
				t.Error(err)
				return
			}
			done, err := ring.RotateIfOlder(ctx, time.Hour)
			if err != nil {
				t.Error(err)
			}
			if done {
				rotations.Add(1)
			}
		})
	}
	wg.Wait()
	if got := rotations.Load(); got != 1 {
		t.Fatalf("rotations: got %d, want 1", got)
	}
	if err := f.ring.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if now, _, _ := f.ring.signer(); now == cur {
		t.Fatal("the aged key is still current")
	}
}

func TestJWKSHandler(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewServer(f.ring)
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("got %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ks, err := ParseJWKS(f.ring.Issuer(), body)
	if err != nil {
		t.Fatal(err)
	}
	kid, _, _ := f.ring.signer()
	if _, ok := ks.PublicKey(kid); !ok || strings.Contains(string(body), `"d"`) {
		t.Fatalf("jwks %s: want the current key and no private part", body)
	}
	post, err := http.Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: got %d, want 405", post.StatusCode)
	}
}

// Run picks up another process's rotation within an interval.
func TestRunReloads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFixture(t, nil)
	watcher, err := OpenKeyRing(ctx, f.store, f.ring.Issuer(), f.kek, WithMinRotateInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	var errs atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		watcher.Run(ctx, 10*time.Millisecond, 0, func(error) { errs.Add(1) })
	}()
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	cur, _, _ := f.ring.signer()
	testwait.Eventually(t, 10*time.Second, func() bool { k, _, _ := watcher.signer(); return k == cur }, "the watching ring to see the rotation")
	cancel()
	<-done
	if errs.Load() != 0 {
		t.Fatalf("%d reload errors", errs.Load())
	}
}
