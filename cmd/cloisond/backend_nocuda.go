//go:build !cuda

package main

import (
	"fmt"

	"github.com/cloison/cloison/kernels"
)

// Builds without the cuda tag never import kernels/cuda (gorgonia.org/cu
// links libcuda and exits the process from its init without a driver).
// --backend cuda then names a backend this binary lacks: say how to get it
// rather than only that it is unknown.
func init() {
	kernels.Register("cuda", func(kernels.Options) (kernels.Backend, error) {
		return nil, fmt.Errorf("%w: %q is not built into this cloisond: rebuild with `go build -tags cuda ./cmd/cloisond` (needs the CUDA driver library at run time; see README, kernels/cuda)",
			kernels.ErrUnknownBackend, "cuda")
	})
}
