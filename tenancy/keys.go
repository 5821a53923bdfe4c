package tenancy

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cloison/cloison/internal/keyfile"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// KeyState is where a signing key is in its life: next → current →
// previous → retired, never backwards (the database refuses it too).
type KeyState string

const (
	// KeyNext is published and verifies, but does not sign yet: verifiers
	// that cache the JWKS learn it before the first token it signs.
	KeyNext KeyState = "next"
	// KeyCurrent signs new tokens, and verifies.
	KeyCurrent KeyState = "current"
	// KeyPrevious was current before the last rotation: it still verifies
	// the tokens it signed until the following rotation retires it. Rotate
	// at least one maximum token lifetime apart.
	KeyPrevious KeyState = "previous"
	// KeyRetired never verifies again.
	KeyRetired KeyState = "retired"
)

// Verifying reports whether tokens signed with a key in this state verify.
func (s KeyState) Verifying() bool { return s == KeyNext || s == KeyCurrent || s == KeyPrevious }

// KEKSize is the size of a key-encryption key: AES-256.
const KEKSize = 32

// LoadKEK reads the key-encryption key that seals signing keys in the
// database: 64 hex digits in the file at path. With create, a missing file
// is made (mode 0600, in a 0700 directory) with a fresh random key — the dev
// issuer's default is ./.cache/cloison/signing.kek. A file readable by group
// or others is refused: whoever reads it and the database can sign tokens.
// Errors: ErrInvalidKey, or the file system's.
func LoadKEK(path string, create bool) ([]byte, error) {
	b, err := keyfile.ReadSecret(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("tenancy: kek: %w", err)
		}
		kek := make([]byte, KEKSize)
		if _, err := rand.Read(kek); err != nil {
			return nil, err
		}
		// Written whole to a temporary file, then linked into place:
		// processes sharing the directory never read a half-written key,
		// and the first link wins (the others read its key).
		f, err := os.CreateTemp(filepath.Dir(path), ".kek-*")
		if err != nil {
			return nil, fmt.Errorf("tenancy: kek: %w", err)
		}
		tmp := f.Name()
		defer os.Remove(tmp)
		_, werr := f.WriteString(hex.EncodeToString(kek) + "\n")
		if err := f.Sync(); werr == nil {
			werr = err
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("tenancy: kek: %w", werr)
		}
		if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
			return LoadKEK(path, false) // another process made it first
		} else if err != nil {
			return nil, fmt.Errorf("tenancy: kek: %w", err)
		}
		return kek, nil
	}
	if errors.Is(err, keyfile.ErrInsecureMode) {
		return nil, fmt.Errorf("%w: key-encryption key: %w", ErrInvalidKey, err)
	}
	if err != nil {
		return nil, fmt.Errorf("tenancy: kek: %w", err)
	}
	kek, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(kek) != KEKSize {
		return nil, fmt.Errorf("%w: key-encryption key %s: want %d hex digits", ErrInvalidKey, path, 2*KEKSize)
	}
	return kek, nil
}

// sealAD binds a sealed seed to its key id and issuer: a sealed blob copied
// onto another row does not open.
func sealAD(kid, issuer string) []byte {
	return []byte("cloison-signing-key-v1\x00" + kid + "\x00" + issuer)
}

func newGCM(kek []byte) (cipher.AEAD, error) {
	if len(kek) != KEKSize {
		return nil, fmt.Errorf("%w: key-encryption key of %d bytes, want %d", ErrInvalidKey, len(kek), KEKSize)
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func seal(kek []byte, kid, issuer string, seed []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return g.Seal(nonce, nonce, seed, sealAD(kid, issuer)), nil
}

func unseal(kek []byte, kid, issuer string, sealed []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	if len(sealed) < g.NonceSize() {
		return nil, fmt.Errorf("%w: sealed key %s too short", ErrInvalidKey, kid)
	}
	seed, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], sealAD(kid, issuer))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: key %s does not open with this key-encryption key", ErrInvalidKey, kid)
	}
	return seed, nil
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key,
// base64url without padding; key ids are thumbprints.
func Thumbprint(pub ed25519.PublicKey) string {
	// Members in lexicographic order, no whitespace (RFC 7638 §3; RFC 8037 §2).
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// KeyInfo describes one signing key, without its private half.
type KeyInfo struct {
	ID          string            `json:"kid"`
	Issuer      string            `json:"issuer"`
	State       KeyState          `json:"state"`
	Public      ed25519.PublicKey `json:"-"`
	CreatedAt   time.Time         `json:"created_at"`
	ActivatedAt time.Time         `json:"activated_at,omitzero"`
	RetiredAt   time.Time         `json:"retired_at,omitzero"`
}

type ringKey struct {
	KeyInfo
	private ed25519.PrivateKey // only for the current key
}

// authenticate returns the private half of stored key k after checking that
// a holder of kek made the row: the sealed seed opens under kek (AES-256-GCM,
// an AEAD, with kid and issuer as additional data) and derives exactly the
// row's public key, whose thumbprint is the kid. The runtime database role
// can write any row it likes, but without the key-encryption key it cannot
// make one that passes: a planted public key never verifies.
// Errors: ErrInvalidKey.
func authenticate(kek []byte, k storedKey) (ed25519.PrivateKey, error) {
	if len(k.public) != ed25519.PublicKeySize || Thumbprint(ed25519.PublicKey(k.public)) != k.kid {
		return nil, fmt.Errorf("%w: key %s is not its public key's thumbprint", ErrInvalidKey, k.kid)
	}
	seed, err := unseal(kek, k.kid, k.issuer, k.sealed)
	if err != nil {
		return nil, err
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if !priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(k.public)) {
		return nil, fmt.Errorf("%w: key %s: private and public halves differ", ErrInvalidKey, k.kid)
	}
	return priv, nil
}

// KeySource gives a verifier the public keys of one issuer.
type KeySource interface {
	// Issuer is the iss claim that the keys sign for.
	Issuer() string
	// PublicKey returns the verifying key kid, or false when kid is unknown
	// or no longer verifies.
	PublicKey(kid string) (ed25519.PublicKey, bool)
}

// KeyRing holds an issuer's Ed25519 signing keys, persisted in the
// signing_keys table with their private halves sealed under a
// key-encryption key that stays outside the database. It is a KeySource.
// Safe for concurrent use; Rotate and Retire take effect at once in this
// process, and in others at their next Reload.
//
// Every verifying key is authenticated on every load (authenticate): a row
// that a holder of the key-encryption key did not make is refused — it
// never verifies, it is logged, and the next rotation retires it.
type KeyRing struct {
	store  *Store
	issuer string
	kek    []byte
	log    *slog.Logger
	// minRotate: Rotate refuses while the current key is younger (set
	// once by OpenKeyRing's options).
	minRotate time.Duration

	mu      sync.RWMutex
	keys    []ringKey // guarded by mu: every authentic key of the issuer, retired ones included
	refused []string  // guarded by mu: kids of the rows the last load refused
}

// KeyRingOption configures OpenKeyRing.
type KeyRingOption func(*KeyRing)

// WithLogger sends refused keys (and nothing else) to l; the default is
// slog.Default().
func WithLogger(l *slog.Logger) KeyRingOption { return func(r *KeyRing) { r.log = l } }

// DefaultMinRotateInterval is the least time between two rotations unless
// WithMinRotateInterval says otherwise: the default maximum token lifetime,
// so a token signed just before a rotation still verifies (by the previous
// key) until it expires.
const DefaultMinRotateInterval = DefaultMaxTTL

// WithMinRotateInterval sets the least age of the current key before Rotate
// (or RotateIfOlder) moves it on; keep it at least the issuer's MaxTTL:
// two rotations closer than a token's lifetime retire the key that signed
// it. Zero removes the minimum (tests only: two quick rotations log
// everyone out). To stop a compromised key at once, Retire it.
func WithMinRotateInterval(d time.Duration) KeyRingOption {
	return func(r *KeyRing) { r.minRotate = max(d, 0) }
}

// ErrRotateTooSoon: the current key is younger than the ring's minimum
// rotation interval; nothing changed.
var ErrRotateTooSoon = cloison.NewError(cloison.CodeConflict, "tenancy: signing keys were rotated too recently")

// OpenKeyRing loads issuer's keys from the store, making a current and a
// next key when the issuer has none (first start). Errors: ErrInvalidKey (a
// key that does not open with kek), the Store's errors.
func OpenKeyRing(ctx context.Context, store *Store, issuer string, kek []byte, opts ...KeyRingOption) (*KeyRing, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: empty issuer", ErrInvalidKey)
	}
	if _, err := newGCM(kek); err != nil {
		return nil, err
	}
	r := &KeyRing{store: store, issuer: issuer, kek: slices.Clone(kek), log: slog.Default(), minRotate: DefaultMinRotateInterval}
	for _, o := range opts {
		o(r)
	}
	if err := r.Reload(ctx); err != nil {
		return nil, err
	}
	if _, _, ok := r.signer(); ok {
		return r, nil
	}
	err := store.inTx(ctx, "signing keys of "+issuer, func(tx pgx.Tx) error {
		// Serialize bootstrap and rotation of this issuer across processes.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.signing_keys:' || $1, 0))`, issuer); err != nil {
			return err
		}
		keys, err := store.signingKeys(ctx, tx, issuer)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.state == KeyCurrent {
				return nil // another process bootstrapped meanwhile
			}
		}
		return r.rotateTx(ctx, tx, keys)
	})
	if err != nil {
		return nil, err
	}
	return r, r.Reload(ctx)
}

// Issuer returns the iss claim this ring signs for.
func (r *KeyRing) Issuer() string { return r.issuer }

// Reload rereads the keys from the store: a key rotated or retired by
// another process takes effect here. Every next, current and previous key
// is authenticated: one that fails is refused (it does not verify), logged,
// and listed by Refused; a current key that fails is an error, because
// either the row was forged or this process holds the wrong key-encryption
// key, and neither may sign. Every row must also be what its last ledger
// event states (as Store.Tenant checks): one that is not fails the load,
// alarmed, and the ring keeps the keys it had. Errors: ErrInvalidKey (the
// current key), ErrRowUnproven, the Store's.
func (r *KeyRing) Reload(ctx context.Context) error {
	stored, err := r.store.signingKeys(ctx, r.store.pool, r.issuer)
	if err != nil {
		return translate(err, "signing keys of "+r.issuer)
	}
	keys := make([]ringKey, 0, len(stored))
	var refused []string
	for _, s := range stored {
		// A row that is not what its last event states (retired, promoted
		// or planted off the record) stops the load: the ring keeps the
		// keys it had.
		if err := r.store.check(audit.RowSigningKeys, s.kid, "", s.binding); err != nil {
			r.log.Error("signing keys not reloaded: a key row is not what its last ledger event states",
				"issuer", r.issuer, "kid", s.kid, "err", err.Error())
			return err
		}
		k := ringKey{KeyInfo: KeyInfo{ID: s.kid, Issuer: s.issuer, State: s.state, Public: ed25519.PublicKey(s.public),
			CreatedAt: s.createdAt, ActivatedAt: s.activatedAt, RetiredAt: s.retiredAt}}
		if s.state.Verifying() {
			priv, err := authenticate(r.kek, s)
			if err != nil {
				if s.state == KeyCurrent {
					return err
				}
				r.log.Error("signing key refused: not made with this deployment's key-encryption key",
					"issuer", r.issuer, "kid", s.kid, "state", string(s.state), "err", err.Error())
				refused = append(refused, s.kid)
				continue
			}
			if s.state == KeyCurrent {
				k.private = priv
			}
		}
		keys = append(keys, k)
	}
	r.mu.Lock()
	r.keys, r.refused = keys, refused
	r.mu.Unlock()
	return nil
}

// Refused returns the kids of the key rows the last load refused (not made
// with this ring's key-encryption key): each is a sign that someone with
// write access to the database tried to plant a key.
func (r *KeyRing) Refused() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.refused)
}

// Rotate retires the previous key, demotes current to previous, promotes
// next to current and makes a new next key, with their ledger events
// (key.revoked, key.rotated, key.created), in one transaction. It refuses
// while the current key has been current for less than the ring's minimum
// rotation interval (by the database's clock). Errors: ErrRotateTooSoon,
// ErrInvalidKey (the current key does not authenticate), ErrNoLedger,
// ErrLedger, the Store's.
func (r *KeyRing) Rotate(ctx context.Context) error {
	_, err := r.rotateIfOlder(ctx, r.minRotate, true)
	return err
}

// RotateIfOlder rotates when the current key has been current for at
// least maxAge (and the minimum rotation interval; by the database's
// clock), and reports whether it did. Many processes may call it on a
// timer: the check and the rotation happen under one lock, so one age makes
// one rotation. Errors: as Rotate, but never ErrRotateTooSoon.
func (r *KeyRing) RotateIfOlder(ctx context.Context, maxAge time.Duration) (bool, error) {
	return r.rotateIfOlder(ctx, max(maxAge, r.minRotate), false)
}

func (r *KeyRing) rotateIfOlder(ctx context.Context, age time.Duration, refuse bool) (bool, error) {
	rotated := false
	err := r.store.inTx(ctx, "signing keys of "+r.issuer, func(tx pgx.Tx) error {
		rotated = false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.signing_keys:' || $1, 0))`, r.issuer); err != nil {
			return err
		}
		var due bool
		err := tx.QueryRow(ctx, `SELECT COALESCE(bool_or(activated_at IS NULL
				OR extract(epoch FROM clock_timestamp() - activated_at) >= $2), true)
			FROM signing_keys WHERE issuer = $1 AND state = 'current'`, r.issuer, age.Seconds()).Scan(&due)
		if err != nil {
			return err
		}
		if !due {
			if refuse {
				return ErrRotateTooSoon.Withf("the current key of %s is younger than %v", r.issuer, age)
			}
			return nil
		}
		keys, err := r.store.signingKeys(ctx, tx, r.issuer)
		if err != nil {
			return err
		}
		rotated = true
		return r.rotateTx(ctx, tx, keys)
	})
	if err != nil {
		return false, err
	}
	return rotated, r.Reload(ctx)
}

// Run keeps the ring current until ctx ends: every interval it rotates if
// rotateAfter > 0 and the current key is that old (RotateIfOlder: one
// rotation per age across all nodes), then reloads, so keys rotated or
// retired by another process take effect here within one interval. Errors
// go to onErr (when not nil) and the ring keeps its last good keys. Run it
// in its own goroutine on every node; an interval of a minute suits a
// rotation age of days.
func (r *KeyRing) Run(ctx context.Context, interval, rotateAfter time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		if rotateAfter > 0 {
			_, err = r.RotateIfOlder(ctx, rotateAfter)
		} else {
			err = r.Reload(ctx)
		}
		if err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
}

// ServeHTTP serves the JWKS document (GET or HEAD): the public keys that
// verify, as application/jwk-set+json, cacheable for five minutes — far
// less than a rotation interval, so verifiers learn each next key long
// before it signs.
func (r *KeyRing) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, err := json.Marshal(r.JWKS())
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	if req.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
}

// rotateTx moves every key one step along its life, in the order the
// unique indexes need, and adds a new next key; with no next key to promote
// (first start, or next retired) it adds a new current key too.
//
// A verifying key that does not authenticate under the ring's key-encryption
// key is retired first and takes no part: a planted next key is never
// promoted to current. A current key that does not authenticate stops the
// rotation (a forged row, or this process has the wrong key-encryption key:
// retiring the deployment's keys from here would log everyone out).
//
// Each row changes through row_apply with its own event (Store.applyKey):
// key.revoked for a key retired, key.rotated for the current key demoted
// and the next promoted, key.created for a new key.
func (r *KeyRing) rotateTx(ctx context.Context, tx pgx.Tx, keys []storedKey) error {
	has := map[KeyState]bool{}
	byState := map[KeyState][]storedKey{}
	for _, k := range keys {
		if !k.state.Verifying() {
			// A retired row that is not what its last event states
			// (retired off the record) is restated as retired by this
			// signed rotation: a key never comes back, and the ring can
			// load again. The mismatch was alarmed when first read.
			if r.store.check(audit.RowSigningKeys, k.kid, "", k.binding) != nil {
				if err := r.store.applyKey(ctx, tx, k, audit.KeyRevoked, KeyRetired); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := authenticate(r.kek, k); err != nil {
			if k.state == KeyCurrent {
				return err
			}
			r.log.Error("signing key retired: not made with this deployment's key-encryption key",
				"issuer", r.issuer, "kid", k.kid, "state", string(k.state), "err", err.Error())
			if err := r.store.applyKey(ctx, tx, k, audit.KeyRevoked, KeyRetired); err != nil {
				return err
			}
			continue
		}
		has[k.state] = true
		byState[k.state] = append(byState[k.state], k)
	}
	// In the order the unique indexes (one next, current, previous) need.
	steps := []struct {
		from, to KeyState
		op       audit.KeyOp
	}{{KeyPrevious, KeyRetired, audit.KeyRevoked}, {KeyCurrent, KeyPrevious, audit.KeyRotated}, {KeyNext, KeyCurrent, audit.KeyRotated}}
	for _, st := range steps {
		for _, k := range byState[st.from] {
			if err := r.store.applyKey(ctx, tx, k, st.op, st.to); err != nil {
				return err
			}
		}
	}
	fresh := []KeyState{KeyNext}
	if !has[KeyNext] {
		fresh = []KeyState{KeyCurrent, KeyNext}
	}
	for _, st := range fresh {
		k, err := r.newKey(st)
		if err != nil {
			return err
		}
		if err := r.store.applyKey(ctx, tx, k, audit.KeyCreated, st); err != nil {
			return err
		}
	}
	return nil
}

func (r *KeyRing) newKey(st KeyState) (storedKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return storedKey{}, err
	}
	kid := Thumbprint(pub)
	sealed, err := seal(r.kek, kid, r.issuer, priv.Seed())
	if err != nil {
		return storedKey{}, err
	}
	return storedKey{kid: kid, issuer: r.issuer, public: pub, sealed: sealed, state: st}, nil
}

// Retire stops key kid from verifying, at once and for good (a suspected
// compromise), and ledgers key.revoked in the same transaction; retiring a
// retired key changes nothing. The current key cannot be retired: Rotate
// first. Errors: ErrNotFound, ErrConflict (kid is current), ErrNoLedger,
// ErrLedger, the Store's.
func (r *KeyRing) Retire(ctx context.Context, kid string) error {
	var state string
	err := r.store.inTx(ctx, "signing key "+kid, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cloison.signing_keys:' || $1, 0))`, r.issuer); err != nil {
			return err
		}
		keys, err := r.store.signingKeys(ctx, tx, r.issuer)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(keys, func(k storedKey) bool { return k.kid == kid })
		if i < 0 {
			return pgx.ErrNoRows
		}
		state = string(keys[i].state)
		if state == string(KeyCurrent) || state == string(KeyRetired) {
			return nil
		}
		return r.store.applyKey(ctx, tx, keys[i], audit.KeyRevoked, KeyRetired)
	})
	if err != nil {
		return err
	}
	if state == string(KeyCurrent) {
		return ErrConflict.Withf("key %s is current; rotate before retiring it", kid)
	}
	return r.Reload(ctx)
}

// PublicKey returns the verifying key kid; false when unknown or retired.
func (r *KeyRing) PublicKey(kid string) (ed25519.PublicKey, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.keys {
		if k.ID == kid && k.State.Verifying() {
			return k.Public, true
		}
	}
	return nil, false
}

// Keys lists the issuer's keys, retired ones included, oldest first.
func (r *KeyRing) Keys() []KeyInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]KeyInfo, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.KeyInfo
	}
	return out
}

// signer returns the current key.
func (r *KeyRing) signer() (string, ed25519.PrivateKey, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.keys {
		if k.State == KeyCurrent && k.private != nil {
			return k.ID, k.private, true
		}
	}
	return "", nil, false
}

// JWKS returns the public keys that verify (next, current, previous) as an
// RFC 7517 key set, ready to serve at the JWKS endpoint.
func (r *KeyRing) JWKS() JWKS {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := JWKS{Keys: []JWK{}}
	for _, k := range r.keys {
		if k.State.Verifying() {
			set.Keys = append(set.Keys, PublicJWK(k.ID, k.Public))
		}
	}
	return set
}
