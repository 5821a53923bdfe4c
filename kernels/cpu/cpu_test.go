package cpu_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/kernels/kernelstest"
)

func open(t testing.TB, threads int) *cpu.Backend {
	t.Helper()
	b, err := cpu.New(kernels.Options{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	kernelstest.Run(t, open(t, 0))
}

func TestConformanceOneThread(t *testing.T) {
	kernelstest.Run(t, open(t, 1))
}

// FuzzArenaLifecycle fuzzes the arena lifecycle property (random leases,
// writes, reads, releases and scrubs over a real pool).
func FuzzArenaLifecycle(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(kernelstest.ArenaLifecycle(open(f, 2))))
}

// FuzzMatMulBatchInvariance fuzzes the batch-invariance property of products.
func FuzzMatMulBatchInvariance(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(kernelstest.MatMulBatchInvariance(open(f, 2))))
}

// TestConformancePaths runs the conformance suite on every kernel path this
// CPU supports, each forced as CLOISON_CPU would force it.
func TestConformancePaths(t *testing.T) {
	for _, p := range cpu.Paths() {
		t.Run(string(p), func(t *testing.T) {
			b, err := cpu.NewWithPath(kernels.Options{Threads: 2}, p)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Path() != p {
				t.Fatalf("got path %v, want %v", b.Path(), p)
			}
			kernelstest.Run(t, b)
		})
	}
}
