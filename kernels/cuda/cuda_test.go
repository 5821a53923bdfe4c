//go:build cuda

package cuda

import (
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/kernelstest"
)

// These tests need a GPU (compute capability ≥ 8.0) and its driver: the
// package's init (gorgonia.org/cu) exits the process without one. CI
// compiles them (make cuda-check); scripts/cuda-device-check.sh runs them.

func open(t testing.TB, o kernels.Options) *Backend {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestDevice(t *testing.T) {
	b := open(t, kernels.Options{})
	name, maj, min := b.Device()
	t.Logf("device %q, compute capability %d.%d", name, maj, min)
	if got, err := kernels.Open(Name, kernels.Options{}); err != nil {
		t.Fatalf("kernels.Open(%q): %v", Name, err)
	} else {
		got.Close()
	}
}

// TestConformance runs the suite every backend passes; its tolerances and
// bit-identity requirements are kernels/cpu's.
func TestConformance(t *testing.T) {
	kernelstest.Run(t, open(t, kernels.Options{}))
}

// TestAgainstCPU: see testAgainstCPU.
func TestAgainstCPU(t *testing.T) { testAgainstCPU(t, open(t, kernels.Options{})) }

// TestDeviceTagMismatch: see testDeviceTagMismatch.
func TestDeviceTagMismatch(t *testing.T) { testDeviceTagMismatch(t, open(t, kernels.Options{})) }

// TestModelAgainstCPU: see testModelAgainstCPU.
func TestModelAgainstCPU(t *testing.T) { testModelAgainstCPU(t, open(t, kernels.Options{})) }

// TestArchs: see testArchs.
func TestArchs(t *testing.T) { testArchs(t, open(t, kernels.Options{})) }

// TestPanicBecomesError: see testPanicBecomesError.
func TestPanicBecomesError(t *testing.T) { testPanicBecomesError(t, open(t, kernels.Options{})) }
