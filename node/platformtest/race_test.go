//go:build faults && race

package platformtest_test

// raceEnabled: the race detector slows the CPU kernels ~20×; the 2026 suite
// runs at 1/256 scale under it. `make test` also runs it in full without it.
const raceEnabled = true
