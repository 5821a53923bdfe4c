//go:build faults && !race

package platformtest_test

const raceEnabled = false
