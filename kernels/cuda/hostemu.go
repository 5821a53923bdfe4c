//go:build cudaemu

package cuda

// #cgo CXXFLAGS: -std=c++17 -O1 -Wno-unused-function
// #cgo LDFLAGS: -lm
// #include <stdint.h>
// #include <stdlib.h>
// #include <string.h>
// int cloison_emu_launch(const char *name, int gx, int gy, int gz, int block, const uint64_t *args, int nargs);
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// NewHostEmulated returns a Backend whose kernels are kernels.cu itself,
// compiled for the host by hostemu.cc and run one fiber per CUDA thread, on
// host memory. Built only with the cudaemu tag (make cuda-emu-test): a
// check of the CUDA C without a GPU, slow and for tests only.
func NewHostEmulated(o kernels.Options) *Backend {
	return newBackend(&hostEmu{}, o)
}

// hostEmu is the executor and driver of NewHostEmulated: device pointers
// are addresses of C heap memory.
type hostEmu struct {
	mu       sync.Mutex
	launches map[string]int // guarded by mu
}

func (h *hostEmu) do(fn func(driver) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.launches == nil {
		h.launches = map[string]int{}
	}
	return protect(func() error { return fn(hostDriver{h}) })
}

func (h *hostEmu) close() {}

type hostDriver struct{ h *hostEmu }

func (hostDriver) alloc(n int64) (uint64, error) {
	// 256-byte aligned and zeroed, like cuMemAlloc + memset.
	p := C.aligned_alloc(256, C.size_t((n+255)/256*256))
	if p == nil {
		return 0, fmt.Errorf("%w: host alloc of %d bytes", ErrDevice, n)
	}
	C.memset(p, 0, C.size_t((n+255)/256*256))
	return uint64(uintptr(p)), nil
}

func (hostDriver) free(p uint64) error {
	C.free(ptr(p))
	return nil
}

// ptr converts a device address (C heap memory) to a pointer.
func ptr(p uint64) unsafe.Pointer { return unsafe.Add(nil, uintptr(p)) }

func (hostDriver) memset(p uint64, n int64) error {
	if n > 0 {
		C.memset(ptr(p), 0, C.size_t(n))
	}
	return nil
}

func (hostDriver) htod(dst uint64, src []byte) error {
	if len(src) > 0 {
		C.memcpy(ptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	}
	return nil
}

func (hostDriver) dtoh(dst []byte, src uint64) error {
	if len(dst) > 0 {
		C.memcpy(unsafe.Pointer(&dst[0]), ptr(src), C.size_t(len(dst)))
	}
	return nil
}

func (hostDriver) dtod(dst, src uint64, n int64) error {
	if n > 0 {
		C.memmove(ptr(dst), ptr(src), C.size_t(n))
	}
	return nil
}

func (hostDriver) sync() error { return nil }

func (d hostDriver) launch(name string, grid [3]int, block int, args ...uint64) error {
	if grid[0] < 1 || grid[1] < 1 || grid[2] < 1 || grid[1] > 65535 || grid[2] > 65535 || block < 1 || block > 1024 {
		return fmt.Errorf("%w: %s: invalid launch %v×%d", ErrDevice, name, grid, block)
	}
	d.h.launches[name]++
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	a := (*C.uint64_t)(C.malloc(C.size_t(8 * max(1, len(args)))))
	defer C.free(unsafe.Pointer(a))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(a)), len(args)), args)
	switch C.cloison_emu_launch(cname, C.int(grid[0]), C.int(grid[1]), C.int(grid[2]), C.int(block), a, C.int(len(args))) {
	case 0:
		return nil
	case -1:
		return fmt.Errorf("%w: %s: unknown kernel or %d arguments", ErrDevice, name, len(args))
	default:
		return fmt.Errorf("%w: %s: a block deadlocked in a barrier", ErrDevice, name)
	}
}
