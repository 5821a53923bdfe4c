package audit

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Domain tags of an embeddings request's digests (apart from the served
// digests of a generation: the same bytes never give the same digest).
const (
	tagEmbedInputs  = "cloison/embedded/input-ids/v1"
	tagEmbedVectors = "cloison/embedded/vectors/v1"
)

// Embedded is what request.completed records of an embeddings request:
// counts and keyed digests (under the tenant's digest key Key, as Served's),
// never text or vectors. Inputs is the number of inputs, Dimensions the
// length of every vector returned; InputsDigest covers the inputs' token
// ids (EmbedInputsDigest), Vectors the vectors as returned
// (EmbedVectorsDigest), so that a tenant holding its inputs and vectors
// shows which were served, and by which model (ModelDigest) and kernels.
// An entry with Embedded has no Served: it is not replayed as a
// generation. Operation names what the request was: empty for an
// embeddings request (so entries written before the field verify
// unchanged), OperationRank for a rerank or score, whose Vectors are its
// raw head outputs, one per pair (Dimensions 1).
type Embedded struct {
	Key          Name   `json:"key"`
	Inputs       int64  `json:"inputs"`
	Dimensions   int64  `json:"dimensions"`
	InputsDigest Digest `json:"inputs_digest"`
	Vectors      Digest `json:"vectors"`
	ModelDigest  Digest `json:"model_digest"`
	Backend      Name   `json:"backend"`
	KernelPath   Name   `json:"kernel_path"`
	Operation    Name   `json:"operation,omitempty"`
}

// OperationRank is Embedded.Operation of a rerank or score request.
const OperationRank Name = "rank"

func (e *Embedded) validate() error {
	if e == nil {
		return nil
	}
	return firstErr(CheckName("embedding.key", string(e.Key)), checkCount("embedding.inputs", e.Inputs),
		checkCount("embedding.dimensions", e.Dimensions), CheckName("embedding.backend", string(e.Backend)),
		CheckName("embedding.kernel_path", string(e.KernelPath)), e.checkOperation())
}

func (e *Embedded) checkOperation() error {
	if e.Operation == "" || e.Operation == OperationRank {
		return nil
	}
	if err := CheckName("embedding.operation", string(e.Operation)); err != nil {
		return err
	}
	return fmt.Errorf("%w: embedding.operation %q", ErrInvalidEvent, e.Operation)
}

// EmbedInputsDigest is the keyed digest of an embeddings request's inputs:
// each input's length, then its ids (big-endian uint32 each).
func EmbedInputsDigest(key []byte, inputs [][]int32) Digest {
	m := keyed(key, tagEmbedInputs)
	var b [4]byte
	for _, in := range inputs {
		binary.BigEndian.PutUint32(b[:], uint32(len(in)))
		m.Write(b[:])
		for _, id := range in {
			binary.BigEndian.PutUint32(b[:], uint32(id))
			m.Write(b[:])
		}
	}
	var d Digest
	copy(d[:], m.Sum(nil))
	return d
}

// EmbedVectorsDigest is the keyed digest of an embeddings request's
// vectors as returned: each vector's length, then its values as
// little-endian float32 (the bytes of OpenAI's base64 encoding).
func EmbedVectorsDigest(key []byte, vecs [][]float32) Digest {
	m := keyed(key, tagEmbedVectors)
	var b [4]byte
	for _, v := range vecs {
		binary.BigEndian.PutUint32(b[:], uint32(len(v)))
		m.Write(b[:])
		for _, x := range v {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			m.Write(b[:])
		}
	}
	var d Digest
	copy(d[:], m.Sum(nil))
	return d
}
