//go:build !faults

package engine

// Unsafe is empty in the default build: no engine defence can be switched
// off. The faults exist only with the faults build tag (unsafe_faults.go).
type Unsafe struct{}

func (Unsafe) skipLengthCheck() bool { return false }
func (Unsafe) placeholderOver() int  { return 0 }
func (Unsafe) skipCountCheck() bool  { return false }
func (Unsafe) placeholder() bool     { return false }
