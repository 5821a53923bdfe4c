package audit

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/cloison/cloison"
)

// Keyed digests of what was served. A request.completed entry
// carries, in Served, HMAC-SHA256 digests of the prompt's token ids, of the
// completion's token ids and of the completion's bytes as sent, under a key
// of the request's tenant. Without the key, a digest of a short prompt
// cannot be searched by anyone reading the ledger (a plain hash of "yes"
// could); with it, the server can tell a tenant that holds the text whether
// it is what was served. Keys are derived, not stored: DigestKey(kek,
// tenant, id) = HKDF-SHA256(kek, info = "cloison served-digest v1" ‖ 0 ‖
// tenant ‖ 0 ‖ id). Rotating is naming a new id (the server's current one
// is written with every digest, so older entries stay checkable under the
// id they name); a tenant's keys are never usable for another tenant's
// entries.

// DigestKeySize is the size of a served-digest key.
const DigestKeySize = 32

// DigestKey derives tenant t's served-digest key of id from the
// key-encryption key. Errors: ErrInvalidEvent for a short kek, an empty
// tenant or an id that is not a Name.
func DigestKey(kek []byte, t cloison.TenantID, id Name) ([]byte, error) {
	return deriveTenantKey(kek, "cloison served-digest v1", t, id)
}

// ReportKey derives the AES-256 key that seals the text a tenant attached to
// its reports (the sealed text is stored in the register database, never
// in the ledger). Errors: as DigestKey.
func ReportKey(kek []byte, t cloison.TenantID) ([]byte, error) {
	return deriveTenantKey(kek, "cloison report-seal v1", t, "k1")
}

func deriveTenantKey(kek []byte, label string, t cloison.TenantID, id Name) ([]byte, error) {
	if len(kek) < 32 {
		return nil, fmt.Errorf("%w: key-encryption key of %d bytes", ErrInvalidEvent, len(kek))
	}
	if err := firstErr(CheckName("tenant", string(t)), CheckName("key", string(id))); err != nil {
		return nil, err
	}
	info := label + "\x00" + string(t) + "\x00" + string(id)
	return hkdf.Key(sha256.New, kek, nil, info, DigestKeySize)
}

// Domain tags keep the three digests of one request apart: the same bytes
// never give the same digest as a prompt and as a completion.
const (
	tagPrompt         = "cloison/served/prompt-ids/v1"
	tagCompletion     = "cloison/served/completion-ids/v1"
	tagCompletionText = "cloison/served/completion-text/v1"
	tagStop           = "cloison/served/stop/v1"
)

func keyed(key []byte, tag string) hash.Hash {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tag))
	m.Write([]byte{0})
	return m
}

func idsDigest(key []byte, tag string, ids []int32) Digest {
	m := keyed(key, tag)
	var b [4]byte
	for _, id := range ids {
		binary.BigEndian.PutUint32(b[:], uint32(id))
		m.Write(b[:])
	}
	var d Digest
	copy(d[:], m.Sum(nil))
	return d
}

// PromptDigest is the keyed digest of a prompt's token ids.
func PromptDigest(key []byte, ids []int32) Digest { return idsDigest(key, tagPrompt, ids) }

// CompletionDigest is the keyed digest of a completion's token ids.
func CompletionDigest(key []byte, ids []int32) Digest { return idsDigest(key, tagCompletion, ids) }

// CompletionTextDigest is the keyed digest of a completion's bytes as the
// API sent them (a tenant holding only the text checks this one: text does
// not always re-tokenize to the ids generated).
func CompletionTextDigest(key []byte, text string) Digest {
	m := keyed(key, tagCompletionText)
	m.Write([]byte(text))
	var d Digest
	copy(d[:], m.Sum(nil))
	return d
}

// StopDigest is the keyed digest of a request's stop strings (text the
// tenant chose, so only its digest is recorded): each length-prefixed.
func StopDigest(key []byte, stop []string) Digest {
	m := keyed(key, tagStop)
	var b [4]byte
	for _, s := range stop {
		binary.BigEndian.PutUint32(b[:], uint32(len(s)))
		m.Write(b[:])
		m.Write([]byte(s))
	}
	var d Digest
	copy(d[:], m.Sum(nil))
	return d
}

// DigestsEqual compares two digests in constant time.
func DigestsEqual(a, b Digest) bool { return hmac.Equal(a[:], b[:]) }

// Served is what a request.completed entry records of what was served: the
// keyed digests, and everything that determines the output given the
// prompt, so that a replay can be exact. Sampling values are written as
// Go's shortest round-trip decimal ('g', -1), so a replay reads back the
// exact float64 the request ran with; the seed as a decimal (it does not fit
// an exact JSON number).
type Served struct {
	Key            Name     `json:"key"` // id of the tenant's digest key
	Prompt         Digest   `json:"prompt"`
	Completion     Digest   `json:"completion"`
	CompletionText Digest   `json:"completion_text"`
	Sampling       Sampling `json:"sampling"`
	ModelDigest    Digest   `json:"model_digest"` // SHA-256 of the model file served
	Backend        Name     `json:"backend"`      // kernels backend (cpu, cuda)
	KernelPath     Name     `json:"kernel_path"`  // its kernel path (generic, avx2, avx512, amx, neon; the backend's name when it has none)
	// Choices, for a request of n > 1 choices, holds every choice's seed
	// and keyed digests in index order (choice 0's are also Completion and
	// CompletionText above); absent for n = 1.
	Choices []ServedChoice `json:"choices,omitempty"`
}

// MaxServedChoices bounds Served.Choices.
const MaxServedChoices = 128

// ServedChoice is one choice of a request of n > 1 (Served.Choices): its
// seed (decimal uint64, derived from the request's) and keyed digests.
type ServedChoice struct {
	Index          int64  `json:"index"`
	Seed           Name   `json:"seed"`
	Completion     Digest `json:"completion"`
	CompletionText Digest `json:"completion_text"`
}

// Sampling is the recorded sampling of a request (see Served).
type Sampling struct {
	Temperature       Name   `json:"temperature"`
	TopK              int64  `json:"top_k"`
	TopP              Name   `json:"top_p"`
	MinP              Name   `json:"min_p"`
	RepetitionPenalty Name   `json:"repetition_penalty"`
	FrequencyPenalty  Name   `json:"frequency_penalty"`
	PresencePenalty   Name   `json:"presence_penalty"`
	Seed              Name   `json:"seed"`        // decimal uint64
	SeedSource        Name   `json:"seed_source"` // client or server (drawn by the server when the request named none)
	MaxTokens         int64  `json:"max_tokens"`  // after the tenant's limits clamped it
	Stops             int64  `json:"stops"`       // number of stop strings
	Stop              Digest `json:"stop"`        // StopDigest of them
	IgnoreEOS         bool   `json:"ignore_eos,omitempty"`
	// Constrained names what else shaped the output beyond these
	// parameters ("logit_bias", "response_format", joined by "+"); replay
	// does not re-apply them, so such a request's replay is inconclusive.
	Constrained Name `json:"constrained,omitempty"`
}

func (s *Served) validate() error {
	if s == nil {
		return nil
	}
	sp := s.Sampling
	if len(s.Choices) > MaxServedChoices {
		return fmt.Errorf("%w: served.choices: more than %d", ErrInvalidEvent, MaxServedChoices)
	}
	for i, c := range s.Choices {
		if c.Index != int64(i) {
			return fmt.Errorf("%w: served.choices[%d].index is %d", ErrInvalidEvent, i, c.Index)
		}
		if err := CheckName("served.choices.seed", string(c.Seed)); err != nil {
			return err
		}
	}
	return firstErr(CheckName("served.key", string(s.Key)), CheckName("served.backend", string(s.Backend)),
		CheckName("served.kernel_path", string(s.KernelPath)),
		CheckName("sampling.temperature", string(sp.Temperature)), checkCount("sampling.top_k", sp.TopK),
		CheckName("sampling.top_p", string(sp.TopP)), CheckName("sampling.min_p", string(sp.MinP)),
		CheckName("sampling.repetition_penalty", string(sp.RepetitionPenalty)),
		CheckName("sampling.frequency_penalty", string(sp.FrequencyPenalty)),
		CheckName("sampling.presence_penalty", string(sp.PresencePenalty)),
		CheckName("sampling.seed", string(sp.Seed)), CheckName("sampling.seed_source", string(sp.SeedSource)),
		checkCount("sampling.max_tokens", sp.MaxTokens), checkCount("sampling.stops", sp.Stops),
		func() error {
			if sp.Constrained == "" {
				return nil
			}
			return CheckName("sampling.constrained", string(sp.Constrained))
		}())
}
