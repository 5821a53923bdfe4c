//go:build !cuda

package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// Without the cuda tag, --backend cuda says how to get it, and the registry
// does not pretend to hold it.
func TestBackendCUDAWithoutTag(t *testing.T) {
	if slices.Contains(kernels.Backends(), "cuda") {
		t.Fatalf("backends %v list cuda in a build without it", kernels.Backends())
	}
	_, err := kernels.Open("cuda", kernels.Options{})
	if !errors.Is(err, kernels.ErrUnknownBackend) || !strings.Contains(err.Error(), "-tags cuda") {
		t.Fatalf("got %v, want ErrUnknownBackend saying to rebuild with -tags cuda", err)
	}
}
