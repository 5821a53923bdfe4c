package gguf

import (
	"fmt"
	"io"
	"os"
)

// Open memory-maps (or, where that fails, reads) the GGUF file at path and
// parses it. Close the File to unmap it. Errors: those of os.Open and reading,
// or Parse's (wrapping ErrFormat).
//
// The file must not be truncated or rewritten while it is open: as with any
// memory-mapped file (and as in llama.cpp), touching a page that no longer
// exists on disk kills the process with SIGBUS. Serve models from read-only
// storage.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size < 0 || uint64(size) > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: %s: size %d does not fit in memory", ErrFormat, path, size)
	}
	data, unmap, err := mmapFile(fh, int(size))
	if err != nil {
		// Mapping is an optimisation: read the file instead.
		if data, err = io.ReadAll(io.LimitReader(fh, size)); err != nil {
			return nil, fmt.Errorf("gguf: reading %s: %w", path, err)
		}
		unmap = nil
	}
	f, err := Parse(data)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if unmap != nil {
		f.closer = unmap
	} else {
		f.closer = func() error { return nil }
	}
	return f, nil
}
