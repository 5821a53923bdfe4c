package prefill

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// ModelFile is the GGUF a node serves and the backend it computes on. Each
// Load is a model instance of its own (backend, weights, arena source): a
// replay engine and a prefill node never share one with the engine.
type ModelFile struct {
	// Path names the file; Bytes, when set instead, holds it (tests).
	Path  string
	Bytes []byte
	// Backend is the kernels backend's registered name ("" : cpu), and
	// Options its options (Threads; Unsafe in faults builds, for the
	// serving instance only).
	Backend string
	Options kernels.Options
	// Name is the model id the API serves ("" : the file's general.name,
	// or the built-in context bag's id).
	Name string
}

// Instance is a model instance and what it holds open; Close closes it.
type Instance struct {
	Model
	file *gguf.File
}

func (l *Instance) Close() {
	if l.Model.Model != nil {
		l.Model.Model.Close()
	}
	if l.Backend != nil {
		l.Backend.Close()
	}
	if l.file != nil {
		l.file.Close()
	}
}

// Load opens an instance of the model with opts.
//
// Errors: those of reading the file, opening the backend, loading the
// weights and the tokenizer; nothing stays open on an error.
func (mf ModelFile) Load(opts kernels.Options) (_ *Instance, err error) {
	l := &Instance{}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	name := mf.Path
	if mf.Bytes != nil {
		name = "(in memory)"
		l.Digest = transfer.Digest(sha256.Sum256(mf.Bytes))
		l.file, err = gguf.Parse(mf.Bytes)
	} else {
		if l.Digest, err = fileDigest(mf.Path); err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		l.file, err = gguf.Open(mf.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	backend := mf.Backend
	if backend == "" {
		backend = "cpu"
	}
	if l.Backend, err = kernels.Open(backend, opts); err != nil {
		return nil, err
	}
	if l.Model.Model, err = model.Load(l.Backend, l.file); err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	if l.Tokenizer, err = tokenizer.FromGGUF(l.file); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	l.Name = mf.Name
	if l.Name == "" {
		l.Name = modelName(l.file)
	}
	return l, nil
}

// fileDigest is the SHA-256 of the file at path: the model's identity,
// the same on every node serving the file.
func fileDigest(path string) (transfer.Digest, error) {
	var d transfer.Digest
	f, err := os.Open(path)
	if err != nil {
		return d, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return d, err
	}
	copy(d[:], h.Sum(nil))
	return d, nil
}

// modelName is the model's general.name, or the built-in model's id.
func modelName(f *gguf.File) string {
	if v, ok := f.String("general.name"); ok && v != "" && v != "context-bag" {
		return v
	}
	return "cloison-context-bag"
}

// KernelPath names what computes on b: the CPU kernel path, or the
// backend's name for a backend without paths (what request.completed
// records, and what a replay must match).
func KernelPath(b kernels.Backend) string {
	if c, ok := b.(*cpu.Backend); ok {
		return string(c.Path())
	}
	return b.Name()
}
