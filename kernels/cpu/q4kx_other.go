//go:build !amd64

package cpu

// q4kDeintGroups: no interleaved matrices here (kset.q4krowsX is amd64's).
var q4kDeintGroups func(dst, src []byte, nb int)
