//go:build !amd64 && !arm64

package cpu

// Only the generic path outside amd64 and arm64 (dot_amd64.go, dot_arm64.go).
var vectorSets []*kset
