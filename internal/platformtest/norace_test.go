//go:build !race

package platformtest_test

const raceEnabled = false
