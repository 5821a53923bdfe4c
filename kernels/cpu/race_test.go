//go:build race

package cpu

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts are not the program's; make test runs the allocation
// tests again without it.
const raceEnabled = true
