//go:build cudaemu

package cuda

import (
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/kernelstest"
)

// The CUDA C of kernels.cu, compiled for the host (hostemu.cc), through the
// whole backend: go test -tags cudaemu ./kernels/cuda (make cuda-emu-test).

func newHostEmulated(t testing.TB) (*Backend, *hostEmu) {
	b := NewHostEmulated(kernels.Options{})
	t.Cleanup(func() { b.Close() })
	return b, b.ex.(*hostEmu)
}

func TestHostEmuConformance(t *testing.T) {
	b, h := newHostEmulated(t)
	kernelstest.Run(t, b)
	for _, name := range kernelNames {
		if h.launches[name] == 0 {
			t.Errorf("kernel %s never launched", name)
		}
	}
}

func TestHostEmuAgainstCPU(t *testing.T) {
	b, _ := newHostEmulated(t)
	testAgainstCPU(t, b)
}

func TestHostEmuDeviceTagMismatch(t *testing.T) {
	b, _ := newHostEmulated(t)
	testDeviceTagMismatch(t, b)
}

func TestHostEmuModelAgainstCPU(t *testing.T) {
	b, _ := newHostEmulated(t)
	testModelAgainstCPU(t, b)
}

func TestHostEmuArchs(t *testing.T) {
	b, _ := newHostEmulated(t)
	testArchs(t, b)
}
