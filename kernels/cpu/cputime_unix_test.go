//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time: on a machine shared
// with other work, a one-thread benchmark's CPU time per operation varies
// far less than its wall time.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
