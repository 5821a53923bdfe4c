//go:build !unix

package gguf

import (
	"errors"
	"os"
)

func mmapFile(*os.File, int) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap unsupported")
}
