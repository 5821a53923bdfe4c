//go:build !faults

package kernelstest

import (
	"testing"

	"github.com/cloison/cloison/kernels"
)

// faultSubtests need a pool defence switched off, which the default build
// cannot do: they run in the faults build (make test runs both).
func faultSubtests(*testing.T, kernels.Backend) {}
