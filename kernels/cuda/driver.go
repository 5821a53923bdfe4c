package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// This file and backend.go and arena.go carry no build tag: the Backend is
// written against driver, the handful of device operations it needs. The
// cuda-tagged device.go implements driver with gorgonia.org/cu on a GPU; the
// package's tag-free tests implement it with Go ports of the kernels, so
// that the host side (checks, launch plans, argument layouts, the transfer
// format) runs the kernelstest suite in every build, GPU or not.

// ErrDevice wraps every failure the CUDA driver reports (and every panic of
// gorgonia.org/cu, recovered at the device goroutine).
var ErrDevice = errors.New("kernels/cuda: device error")

// driver is the device as the Backend uses it. Pointers are device
// addresses. Every method runs inside executor.do, in order: work queued by
// launch and memset runs before anything queued after it, and htod, dtoh
// and sync return after everything queued before them finished.
type driver interface {
	alloc(n int64) (uint64, error)
	// free releases an allocation once the work queued before it is done.
	free(p uint64) error
	memset(p uint64, n int64) error // zero n bytes (asynchronously)
	htod(dst uint64, src []byte) error
	dtoh(dst []byte, src uint64) error
	dtod(dst, src uint64, n int64) error
	sync() error
	// launch queues kernel name of kernels.cu with a grid×block launch;
	// each argument travels in a uint64 (see ptrArg and the others).
	launch(name string, grid [3]int, block int, args ...uint64) error
}

// kernelNames are the entry points of kernels.cu.
var kernelNames = []string{
	"matmul", "embed", "rmsnorm", "rope", "swiglu", "silu_op", "add", "softmax",
	"write_kv", "paged_attention_check", "paged_attention",
}

// executor runs closures against the driver one at a time, in order (on
// a GPU: on the goroutine that owns the context).
type executor interface {
	do(fn func(driver) error) error
	close()
}

func protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v", ErrDevice, r)
		}
	}()
	return fn()
}

// Kernel arguments: cu copies 8 bytes per parameter, so each travels in a
// uint64 (a kernel reads the low bytes of 4-byte ones: little-endian).
func ptrArg(p uint64) uint64    { return p }
func intArg(v int) uint64       { return uint64(uint32(int32(v))) }
func longArg(v int64) uint64    { return uint64(v) }
func floatArg(v float32) uint64 { return uint64(math.Float32bits(v)) }

// scratch is a device buffer for the small per-operation arrays (token ids,
// positions, page lists), grown as needed. Used only inside executor.do.
type scratch struct {
	ptr uint64
	len int64
}

// stage copies b into the scratch buffer and returns its device address.
// The copy is ordered after every kernel queued before it, so reusing the
// buffer for each operation is safe.
func (s *scratch) stage(d driver, b []byte) (uint64, error) {
	n := int64(len(b))
	if n == 0 {
		return 0, nil
	}
	if n > s.len {
		if s.ptr != 0 {
			if err := d.free(s.ptr); err != nil {
				return 0, err
			}
			s.ptr, s.len = 0, 0
		}
		size := max(n, 1<<20)
		p, err := d.alloc(size)
		if err != nil {
			return 0, err
		}
		s.ptr, s.len = p, size
	}
	return s.ptr, d.htod(s.ptr, b)
}

// packer lays out several small host arrays in one buffer for one stage
// call; each starts 16-byte aligned.
type packer struct{ buf []byte }

func (p *packer) add(b []byte) uint64 {
	for len(p.buf)%16 != 0 {
		p.buf = append(p.buf, 0)
	}
	off := uint64(len(p.buf))
	p.buf = append(p.buf, b...)
	return off
}

// bytesOf views a slice's memory as bytes (little-endian hosts: the device
// reads them as they are).
func bytesOf[T int32 | int64 | uint64 | float64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}
