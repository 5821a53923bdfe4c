package cpu

import "syscall"

// amxPermit asks Linux for the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which a process must hold
// before its first tile instruction; the permission covers every thread of
// the process. It reports whether the kernel granted it (it refuses where
// it does not support AMX, which also covers XCR0's tile bits).
func amxPermit() bool {
	const (
		sysArchPrctl     = 158
		archReqXcompPerm = 0x1023
		xfeatureXtiledat = 18
	)
	_, _, errno := syscall.RawSyscall(sysArchPrctl, archReqXcompPerm, xfeatureXtiledat, 0)
	return errno == 0
}
