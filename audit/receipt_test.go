package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
)

func receiptKey(t testing.TB, origin Name, seed string) (note.Signer, string) {
	t.Helper()
	key := ed25519.NewKeyFromSeed([]byte(strings.Repeat(seed, 32)[:32]))
	s, err := TreeSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	vk, err := TreeVerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return s, vk
}

func completedRecord(t *testing.T, req cloison.RequestID) Record {
	t.Helper()
	rec, err := Event{OccurredAt: time.Unix(1700000000, 0), Tenant: "acme", Actor: "node-1",
		Payload: RequestCompleted{Request: req, Model: "m", PromptTokens: 3, CompletionTokens: 7, Pages: 1, Tier: "always"}}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReceiptRoundTrip: a receipt signed by the log key opens with the
// published verifier key alone and states the entry's leaf hash (the tree
// leaf of the canonical payload), its request, tenant, time and deadline.
func TestReceiptRoundTrip(t *testing.T) {
	signer, vk := receiptKey(t, "cloison-test", "a")
	rec := completedRecord(t, "req-1")
	now := time.Unix(1700000123, 456)
	r, err := NewReceipt("cloison-test", rec, "req-1", now)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := SignReceipt(signer, r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(enc, "\r\n ") {
		t.Fatalf("receipt %q is not one header-safe line", enc)
	}
	got, err := OpenReceipt(enc, vk)
	if err != nil {
		t.Fatal(err)
	}
	if got != r {
		t.Fatalf("got %+v, want %+v", got, r)
	}
	if got.Leaf != tlog.RecordHash(rec.Payload) {
		t.Fatalf("leaf %x is not the tree leaf of the payload", got.Leaf)
	}
	if want := time.Unix(1700000123, 0).Add(MaxMergeDelay).UTC(); !got.Deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", got.Deadline, want)
	}
}

// TestReceiptRefusals: another key, another origin, an edited text, a
// checkpoint note presented as a receipt, and noise are all refused with
// a named error.
func TestReceiptRefusals(t *testing.T) {
	signer, vk := receiptKey(t, "cloison-test", "a")
	_, otherVK := receiptKey(t, "cloison-test", "b")
	r, err := NewReceipt("cloison-test", completedRecord(t, "req-1"), "req-1", time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := SignReceipt(signer, r)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(enc)
	edited := base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(raw), "request req-1", "request req-2", 1)))
	cp, err := note.Sign(&note.Note{Text: "cloison-test\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	wrongOrigin := r
	wrongOrigin.Origin = "elsewhere"
	if _, err := SignReceipt(signer, wrongOrigin); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("signing another origin's receipt: got %v, want ErrInvalidEvent", err)
	}
	for _, c := range []struct {
		name, enc, vk string
		want          error
	}{
		{"another key", enc, otherVK, ErrBadSignature},
		{"edited", edited, vk, ErrBadSignature},
		{"a checkpoint", base64.StdEncoding.EncodeToString(cp), vk, ErrMalformed},
		{"not base64", "%%%", vk, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := OpenReceipt(c.enc, c.vk); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// TestCheckReceipts: a receipt whose leaf the verified log holds is
// included; one it lacks is pending before its deadline and missing
// after, and the error names the request and the leaf.
func TestCheckReceipts(t *testing.T) {
	signer, vk := receiptKey(t, "cloison-test", "a")
	at := time.Unix(1700000000, 0)
	var lines []string
	held := map[tlog.Hash]uint64{}
	for i, id := range []cloison.RequestID{"req-kept", "req-cut", "req-late"} {
		rec := completedRecord(t, id)
		when := at
		if id == "req-late" {
			when = at.Add(MaxMergeDelay)
		}
		r, err := NewReceipt("cloison-test", rec, id, when)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := SignReceipt(signer, r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, enc)
		if id == "req-kept" {
			held[r.Leaf] = uint64(i + 1)
		}
	}
	rs, err := ReadReceipts([]byte("# receipts\n"+strings.Join(lines, "\n")+"\n\n"), vk)
	if err != nil {
		t.Fatal(err)
	}
	rep := CheckReceipts(rs, "cloison-test", at.Add(MaxMergeDelay+time.Second), func(h tlog.Hash) (uint64, bool) {
		p, ok := held[h]
		return p, ok
	})
	if len(rep.Included) != 1 || rep.Included[0].Request != "req-kept" || rep.Included[0].Pos != 1 {
		t.Fatalf("included %+v, want req-kept at 1", rep.Included)
	}
	if len(rep.Pending) != 1 || rep.Pending[0].Request != "req-late" {
		t.Fatalf("pending %+v, want req-late", rep.Pending)
	}
	err = rep.Err()
	if !errors.Is(err, ErrReceiptBroken) || cloison.ErrorCode(err) != cloison.CodeConflict {
		t.Fatalf("got %v, want ErrReceiptBroken (conflict)", err)
	}
	cut := rs[1]
	if msg := err.Error(); !strings.Contains(msg, "request req-cut") || !strings.Contains(msg, base64.StdEncoding.EncodeToString(cut.Leaf[:])) {
		t.Fatalf("error %q does not name req-cut and its leaf", msg)
	}
	if _, err := ReadReceipts([]byte(lines[0]+"\nnot-a-receipt\n"), vk); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want an error naming line 2", err)
	}
}

// BenchmarkSignReceipt is the cost a receipt adds to every acknowledged
// request: one Ed25519 signature and its encoding; BenchmarkOpenReceipt a
// verifier's per-receipt cost.
func BenchmarkSignReceipt(b *testing.B) {
	signer, _ := receiptKey(b, "cloison-test", "a")
	rec, _ := Event{OccurredAt: time.Unix(1700000000, 0), Tenant: "acme", Actor: "node-1",
		Payload: RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 3, CompletionTokens: 7, Pages: 1, Tier: "always"}}.Prepare()
	for b.Loop() {
		r, err := NewReceipt("cloison-test", rec, "req-1", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := SignReceipt(signer, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenReceipt(b *testing.B) {
	signer, vk := receiptKey(b, "cloison-test", "a")
	rec, _ := Event{OccurredAt: time.Unix(1700000000, 0), Tenant: "acme", Actor: "node-1",
		Payload: RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 3, CompletionTokens: 7, Pages: 1, Tier: "always"}}.Prepare()
	r, _ := NewReceipt("cloison-test", rec, "req-1", time.Now())
	enc, _ := SignReceipt(signer, r)
	for b.Loop() {
		if _, err := OpenReceipt(enc, vk); err != nil {
			b.Fatal(err)
		}
	}
}
