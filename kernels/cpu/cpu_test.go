package cpu_test

import (
	"testing"

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
