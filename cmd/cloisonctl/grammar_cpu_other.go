//go:build !linux

package main

import "time"

var start = time.Now()

// threadCPU falls back to wall time where the thread clock is not read.
func threadCPU() time.Duration { return time.Since(start) }

const threadCPUClock = "wall time"
