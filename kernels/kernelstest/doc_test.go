package kernelstest_test

import (
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/kernelstest"
)

// A backend's test file runs the suite against a fresh backend.
func Example() {
	var t *testing.T // the test's *testing.T
	b, err := kernels.Open("cuda", kernels.Options{})
	if err != nil {
		return // not built with the cuda tag, or no GPU
	}
	defer b.Close()
	kernelstest.Run(t, b)
}
