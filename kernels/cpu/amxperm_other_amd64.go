//go:build amd64 && !linux

package cpu

// amxPermit: the AMX kernels run on Linux only (elsewhere the OS's way of
// enabling the tile state is not implemented).
func amxPermit() bool { return false }
