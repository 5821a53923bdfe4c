//go:build !cuda

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloison/cloison/kernels"
)

func TestBackendCUDAWithoutTag(t *testing.T) {
	_, err := kernels.Open("cuda", kernels.Options{})
	if !errors.Is(err, kernels.ErrUnknownBackend) || !strings.Contains(err.Error(), "-tags cuda") {
		t.Fatalf("got %v, want ErrUnknownBackend saying to rebuild with -tags cuda", err)
	}
}
