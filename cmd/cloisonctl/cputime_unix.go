//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time (0 where unknown).
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
