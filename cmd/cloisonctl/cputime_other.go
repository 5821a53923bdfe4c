//go:build !unix

package main

import "time"

// cpuTime is unknown here: decode tok/cpu-s is not reported.
func cpuTime() time.Duration { return 0 }
