package audit

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// Digest keys are per tenant and per key id: another tenant's key, or a
// rotated id, gives another digest of the same tokens, so a digest read in
// the ledger cannot be checked against a guess without the server's key.
func TestDigestKeysSeparateTenantsAndIDs(t *testing.T) {
	kek := bytes.Repeat([]byte{7}, 32)
	ka, err := DigestKey(kek, "tenant-a", "sd1")
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := DigestKey(kek, "tenant-b", "sd1")
	ka2, _ := DigestKey(kek, "tenant-a", "sd2")
	again, _ := DigestKey(kek, "tenant-a", "sd1")
	if !bytes.Equal(ka, again) {
		t.Fatal("key derivation is not deterministic")
	}
	ids := []int32{1, 2, 3}
	if PromptDigest(ka, ids) == PromptDigest(kb, ids) || PromptDigest(ka, ids) == PromptDigest(ka2, ids) {
		t.Fatal("two keys give the same digest")
	}
	if PromptDigest(ka, ids) == CompletionDigest(ka, ids) {
		t.Fatal("a prompt and a completion of the same ids share a digest")
	}
	if PromptDigest(ka, ids) == Sum([]byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3}) {
		t.Fatal("the digest is an unkeyed hash")
	}
	if _, err := DigestKey(kek, "tenant-a", "a b"); err == nil {
		t.Error("a key id that is not a Name was accepted")
	}
	if _, err := DigestKey(kek, "", "sd1"); err == nil {
		t.Error("an empty tenant was accepted")
	}
	if _, err := DigestKey(kek[:16], "tenant-a", "sd1"); err == nil {
		t.Error("a 16-byte kek was accepted")
	}
}

// Token-id digests are injective in practice on distinct sequences: a
// different id, order or length changes the digest (property).
func TestTokenDigestsDistinguishSequences(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SliceOf(rapid.Int32Range(0, 1<<20)).Draw(t, "a")
		b := rapid.SliceOf(rapid.Int32Range(0, 1<<20)).Draw(t, "b")
		if reflect.DeepEqual(a, b) != (CompletionDigest(key, a) == CompletionDigest(key, b)) {
			t.Fatalf("digest equality disagrees with sequence equality for %v and %v", a, b)
		}
	})
	// Stop strings are length-prefixed: ["ab","c"] and ["a","bc"] differ.
	if StopDigest(key, []string{"ab", "c"}) == StopDigest(key, []string{"a", "bc"}) {
		t.Fatal("stop digests of different lists are equal")
	}
}

// A request.completed entry with Served round-trips through the ledger's
// canonical encoding, and a Served holding text is refused.
func TestServedRoundTripsAndRefusesText(t *testing.T) {
	sv := &Served{Key: "sd1", Prompt: Digest{1}, Completion: Digest{2}, CompletionText: Digest{3}, ModelDigest: Digest{4},
		Backend: "cpu", KernelPath: "avx2", Sampling: Sampling{Temperature: "0.7", TopK: 40, TopP: "0.95", MinP: "0",
			RepetitionPenalty: "1", FrequencyPenalty: "-0.5", PresencePenalty: "1e-05", Seed: "18446744073709551615",
			SeedSource: "server", MaxTokens: 16, Stops: 1, Stop: Digest{5}}}
	p := RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 3, CompletionTokens: 2, Tier: "cross-tenant", Served: sv}
	b, err := Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:n", Payload: p}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	env, err := DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &p) {
		t.Fatalf("got %+v, want %+v", got, p)
	}
	bad := *sv
	bad.KernelPath = "the secret prompt"
	p.Served = &bad
	if _, err := (Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:n", Payload: p}).Canonical(); !errors.Is(err, ErrTextNotAllowed) {
		t.Fatalf("got %v, want ErrTextNotAllowed", err)
	}
}

func TestReplayVerdictsNeedTheirEvidence(t *testing.T) {
	for _, c := range []struct {
		p    RequestReplayed
		want bool
	}{
		{RequestReplayed{Request: "r", By: "tenant", Verdict: VerdictConfirmed, Completion: &Digest{}}, true},
		{RequestReplayed{Request: "r", By: "tenant", Verdict: VerdictConfirmed}, false},
		{RequestReplayed{Request: "r", By: "tenant", Verdict: VerdictInconclusive}, false},
		{RequestReplayed{Request: "r", By: "tenant", Verdict: VerdictInconclusive, Reason: "model-digest-differs"}, true},
		{RequestReplayed{Request: "r", By: "tenant", Verdict: "maybe", Completion: &Digest{}}, false},
	} {
		if err := c.p.validate(); (err == nil) != c.want {
			t.Errorf("%+v: got %v, want ok=%v", c.p, err, c.want)
		}
	}
	if err := (ReportReceived{Report: "r", Request: "q", Reason: "because", Incident: "i"}).validate(); err == nil {
		t.Error("an unknown reason was accepted")
	}
}

// Served.Choices (n > 1) round-trip; indexes must be 0, 1, … and a seed
// must be a name (no text).
func TestServedChoices(t *testing.T) {
	base := func() RequestCompleted {
		return RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 3, CompletionTokens: 4, Tier: "cross-tenant",
			Served: &Served{Key: "sd1", Backend: "cpu", KernelPath: "avx2", Sampling: Sampling{Temperature: "1", TopP: "0", MinP: "0",
				RepetitionPenalty: "1", FrequencyPenalty: "0", PresencePenalty: "0", Seed: "7", SeedSource: "client", MaxTokens: 2},
				Choices: []ServedChoice{{Index: 0, Seed: "7", Completion: Digest{1}}, {Index: 1, Seed: "99", Completion: Digest{2}}}}}
	}
	p := base()
	b, err := Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:n", Payload: p}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	env, err := DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := env.DecodePayload(); err != nil || !reflect.DeepEqual(got, &p) {
		t.Fatalf("got %+v (%v), want %+v", got, err, p)
	}
	for name, change := range map[string]func(*Served){
		"index out of order": func(s *Served) { s.Choices[1].Index = 5 },
		"text as seed":       func(s *Served) { s.Choices[1].Seed = "the secret prompt" },
		"too many": func(s *Served) {
			s.Choices = make([]ServedChoice, MaxServedChoices+1)
			for i := range s.Choices {
				s.Choices[i] = ServedChoice{Index: int64(i), Seed: "1"}
			}
		},
	} {
		p := base()
		change(p.Served)
		if _, err := (Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:n", Payload: p}).Canonical(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
