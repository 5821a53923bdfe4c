//go:build race

package engine

// raceEnabled: the race detector slows the CPU kernels ~20×; property tests
// run fewer cases under it. `make test` also runs them in full without it.
const raceEnabled = true
