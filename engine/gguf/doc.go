// Package gguf reads and writes GGUF files (versions 2 and 3), the model
// format of llama.cpp and ggml.
//
// A File is parsed from bytes that stay in place: Open memory-maps the file
// (syscall.Mmap, read-only) or, where mapping is not possible, reads it into
// memory; Parse takes any byte slice. Tensor data are returned as sub-slices of
// those bytes, so loading a model copies nothing until the caller converts the
// weights for its backend.
//
// Guarantees: parsing never panics, never reads outside the input and never
// allocates more than a small multiple of the input's size, whatever the input
// holds. Every count, length, dimension and offset is checked before use:
// counts and lengths against the bytes that remain, dimensions and byte sizes
// against overflow, tensor types against the table of known ggml types, tensor
// extents against the data section, and tensors against each other (no
// overlap, offsets aligned to general.alignment). A file that fails a check is
// rejected as a whole with an error wrapping ErrFormat that says which field of
// which entry was wrong.
//
// The Writer produces files that follow the specification exactly (see
// github.com/ggml-org/ggml/blob/master/docs/gguf.md): little-endian, strings as
// uint64 length plus bytes without terminator, arrays as element type, uint64
// count, elements; tensor infos followed by padding to the alignment; tensor
// offsets relative to the start of the aligned data section, each a multiple of
// the alignment, each tensor padded to it.
//
//	f, err := gguf.Open("model.gguf")
//	if err != nil { ... }
//	defer f.Close()
//	arch, _ := f.String("general.architecture")
//	for _, t := range f.Tensors { data := f.Data(t); ... }
//
// # Checked by tests
//
// Truncated or hostile GGUF files get an error wrapping ErrFormat: never a
// panic, an out-of-bounds read or an unbounded allocation (FuzzParse, FuzzLoad
// in engine/model, hostile-file tables). Serve model files from read-only
// storage: a mapped file must not change while open.
package gguf
