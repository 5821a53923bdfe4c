//go:build !amd64

package cpu

// Only the generic path outside amd64 (NEON on arm64 is future work).
var vectorSets []*kset
