package transfer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/kernels"
	"lukechampine.com/blake3"
)

// Version is the manifest format version. 2: the layout carries the KV
// element type (kernels.KVType), under both MACs.
const Version = 2

// Digest is a 32-byte digest: a page's BLAKE3-256, a model's identity.
type Digest [32]byte

// ReservationID is the random nonce a receiver draws for each reservation.
// The manifest must echo it, so a manifest made for an earlier reservation (a
// replay, or one from before a restart, when epochs start over) never matches.
type ReservationID [16]byte

// PageDigest returns the digest of a page in the transfer format: BLAKE3-256.
// BLAKE3 is a collision-resistant hash (128-bit security), so a sender who
// does not know a page's bytes cannot forge other bytes with its digest, and
// the manifest MAC covers every digest. It measured ~2.4× SHA-256 (SHA-NI)
// here (BenchmarkPageDigest; the choice is argued in doc.go).
func PageDigest(page []byte) Digest { return blake3.Sum256(page) }

// Layout is the KV geometry a page was written with: the arena config minus
// its page count, and the element type K and V are stored in (a page is
// transferred in the arena's own format, so F16 pages are half the bytes of
// F32 ones). Both ends must agree on it exactly.
type Layout struct {
	Layers, KVHeads, HeadDim, PageTokens int
	KV                                   kernels.KVType
}

// LayoutOf returns the layout of an arena config.
func LayoutOf(c kernels.ArenaConfig) Layout {
	return Layout{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, PageTokens: c.PageTokens, KV: c.KV}
}

// PageBytes returns the size of one page in the transfer format.
func (l Layout) PageBytes() int {
	return kernels.ArenaConfig{Pages: 1, PageTokens: l.PageTokens, Layers: l.Layers, KVHeads: l.KVHeads, HeadDim: l.HeadDim, KV: l.KV}.PageBytes()
}

// Header is the binding of a transfer: who it is for, from which lease, into
// which reservation, of which model and layout, how much.
type Header struct {
	KeyID         string
	Tenant        cloison.TenantID
	Request       cloison.RequestID
	SenderEpoch   uint64 // the prefill lease's epoch
	ReceiverEpoch uint64 // the reservation's lease epoch on the decode node
	Reservation   ReservationID
	Model         Digest
	Layout        Layout
	Tokens        int
	Pages         int
}

// Manifest is a Header plus the digest of every page, in order.
type Manifest struct {
	Header
	Digests []Digest
}

// Key is one cluster key: HMAC-SHA256 secret and the id that names it in
// headers.
type Key struct {
	ID     string
	Secret []byte
}

// KeyRing holds the cluster keys a node accepts; it signs with the current
// one. Rotation: add the new key to every node's ring, then make it current
// everywhere, then drop the old one. Immutable after NewKeyRing; safe for
// concurrent use.
type KeyRing struct {
	current string
	keys    map[string][]byte
}

// NewKeyRing returns a ring that signs with current and also accepts older.
// Secrets must be at least 32 bytes; ids unique, non-empty and at most 64
// bytes. Errors: ErrInvalid.
func NewKeyRing(current Key, older ...Key) (*KeyRing, error) {
	r := &KeyRing{current: current.ID, keys: map[string][]byte{}}
	for _, k := range append([]Key{current}, older...) {
		switch {
		case k.ID == "" || len(k.ID) > 64:
			return nil, fmt.Errorf("%w: key id %q", ErrInvalid, k.ID)
		case len(k.Secret) < 32:
			return nil, fmt.Errorf("%w: key %q has %d bytes, want at least 32", ErrInvalid, k.ID, len(k.Secret))
		}
		if _, dup := r.keys[k.ID]; dup {
			return nil, fmt.Errorf("%w: key %q listed twice", ErrInvalid, k.ID)
		}
		r.keys[k.ID] = append([]byte(nil), k.Secret...)
	}
	return r, nil
}

// NewKey returns a random 32-byte key with the given id.
func NewKey(id string) (Key, error) {
	k := Key{ID: id, Secret: make([]byte, 32)}
	if _, err := rand.Read(k.Secret); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Current returns the id of the key the ring signs with.
func (r *KeyRing) Current() string { return r.current }

const (
	headerDomain   = "cloison/transfer/v1/header\x00"
	manifestDomain = "cloison/transfer/v1/manifest\x00"
)

// canonical encodes h unambiguously (fixed-width integers, length-prefixed
// strings): the bytes both MACs cover. Protobuf encoding is not canonical and
// is never MACed.
func (h *Header) canonical() []byte {
	b := make([]byte, 0, 160+len(h.KeyID)+len(h.Tenant)+len(h.Request))
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint32(b, Version)
	str(h.KeyID)
	str(string(h.Tenant))
	str(string(h.Request))
	b = binary.BigEndian.AppendUint64(b, h.SenderEpoch)
	b = binary.BigEndian.AppendUint64(b, h.ReceiverEpoch)
	b = append(b, h.Reservation[:]...)
	b = append(b, h.Model[:]...)
	for _, v := range []int{h.Layout.Layers, h.Layout.KVHeads, h.Layout.HeadDim, h.Layout.PageTokens, int(h.Layout.KV), h.Tokens, h.Pages} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func (r *KeyRing) mac(id, domain string, parts ...[]byte) ([32]byte, error) {
	key, ok := r.keys[id]
	if !ok {
		return [32]byte{}, fmt.Errorf("unknown key %q", id)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	for _, p := range parts {
		m.Write(p)
	}
	var out [32]byte
	m.Sum(out[:0])
	return out, nil
}

// HeaderMAC returns the MAC of h under the key h.KeyID names.
func (r *KeyRing) HeaderMAC(h *Header) ([32]byte, error) {
	return r.mac(h.KeyID, headerDomain, h.canonical())
}

// ManifestMAC returns the MAC of m (header and every page digest, in order)
// under the key m.KeyID names.
func (r *KeyRing) ManifestMAC(m *Manifest) ([32]byte, error) {
	n := binary.BigEndian.AppendUint32(nil, uint32(len(m.Digests)))
	ds := make([]byte, 0, 32*len(m.Digests))
	for _, d := range m.Digests {
		ds = append(ds, d[:]...)
	}
	return r.mac(m.KeyID, manifestDomain, m.canonical(), n, ds)
}

func macEqual(a [32]byte, b []byte) bool { return subtle.ConstantTimeCompare(a[:], b) == 1 }
