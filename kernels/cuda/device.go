//go:build cuda

package cuda

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cloison/cloison/kernels"
)

// ptxFS holds the kernels compiled by `make cuda-ptx` (committed; `make
// cuda-check` fails when they are stale).
//
//go:embed ptx/kernels_sm80.ptx ptx/kernels_sm90.ptx
var ptxFS embed.FS

// ErrDevice wraps every failure the CUDA driver reports (and every panic of
// gorgonia.org/cu, recovered at the funnel).
var ErrDevice = errors.New("kernels/cuda: device error")

// kernelNames are the entry points of kernels.cu.
var kernelNames = []string{
	"matmul", "embed", "rmsnorm", "rope", "swiglu", "silu_op", "add", "softmax",
	"write_kv", "paged_attention_check", "paged_attention",
}

// device owns the CUDA context. Every driver call runs on one goroutine,
// locked to its OS thread, that executes the closures sent on work in order:
// the context is current on that thread only, and the order of the closures
// is the order of the work on the device (all of it on the legacy default
// stream, so a synchronous copy also waits for the kernels before it).
type device struct {
	work chan func()
	quit chan struct{} // closed by close
	done chan struct{} // closed when the goroutine has exited
	once sync.Once

	// Owned by the device goroutine.
	ctx     cu.CUContext
	mod     cu.Module
	fn      map[string]cu.Function
	scratch cu.DevicePtr
	scrLen  int64
	name    string
	cc      [2]int
}

// openDevice starts the device goroutine, creates a context on GPU ordinal
// and loads the module for its compute capability.
func openDevice(ordinal int) (*device, error) {
	d := &device{work: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}), fn: make(map[string]cu.Function)}
	started := make(chan error, 1)
	go d.loop(ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

func (d *device) loop(ordinal int, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	defer close(d.done)
	if err := protect(func() error { return d.init(ordinal) }); err != nil {
		started <- err
		return
	}
	started <- nil
	for running := true; running; {
		select {
		case fn := <-d.work:
			fn()
		case <-d.quit:
			running = false
		}
	}
	_ = protect(func() error {
		if d.scratch != 0 {
			_ = cu.MemFree(d.scratch)
		}
		return d.ctx.Destroy()
	})
}

func (d *device) init(ordinal int) error {
	n, err := cu.NumDevices()
	if err != nil {
		return derr("counting devices", err)
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("%w: device %d of %d", kernels.ErrShape, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return derr("device", err)
	}
	maj, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return derr("compute capability", err)
	}
	min, err := dev.Attribute(cu.ComputeCapabilityMinor)
	if err != nil {
		return derr("compute capability", err)
	}
	d.cc = [2]int{maj, min}
	if d.name, err = dev.Name(); err != nil {
		return derr("device name", err)
	}
	file := ""
	switch {
	case maj >= 9:
		file = "ptx/kernels_sm90.ptx"
	case maj == 8:
		file = "ptx/kernels_sm80.ptx"
	default:
		return fmt.Errorf("%w: %s has compute capability %d.%d; kernels/cuda needs 8.0 or newer", ErrDevice, d.name, maj, min)
	}
	ptx, err := ptxFS.ReadFile(file)
	if err != nil {
		return err
	}
	// cuCtxCreate makes the context current on this (locked) thread.
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return derr("creating a context", err)
	}
	if d.mod, err = cu.LoadData(string(ptx)); err != nil {
		_ = d.ctx.Destroy()
		return derr("loading "+file+" (the driver must support CUDA 11.8 PTX)", err)
	}
	for _, name := range kernelNames {
		f, err := d.mod.Function(name)
		if err != nil {
			_ = d.ctx.Destroy()
			return derr("kernel "+name, err)
		}
		d.fn[name] = f
	}
	return nil
}

// do runs fn on the device goroutine and returns its error; a panic in fn
// (gorgonia.org/cu panics on some driver errors) becomes an ErrDevice
// error. After close it returns kernels.ErrClosed.
func (d *device) do(fn func() error) error {
	res := make(chan error, 1)
	select {
	case d.work <- func() { res <- protect(fn) }:
		return <-res
	case <-d.done:
		return kernels.ErrClosed
	}
}

// close stops the goroutine after the closure it is running and destroys
// the context; senders that were not served get kernels.ErrClosed. (work is
// never closed: a concurrent send would panic.)
func (d *device) close() {
	d.once.Do(func() { close(d.quit) })
	<-d.done
}

func protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v", ErrDevice, r)
		}
	}()
	return fn()
}

func derr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %v", ErrDevice, what, err)
}

// Kernel arguments: cu copies 8 bytes per parameter, so each travels in a
// uint64 (the kernel reads the low bytes of 4-byte ones: little-endian).
func ptrArg(p cu.DevicePtr) uint64 { return uint64(p) }
func intArg(v int) uint64          { return uint64(uint32(int32(v))) }
func longArg(v int64) uint64       { return uint64(v) }
func floatArg(v float32) uint64    { return uint64(math.Float32bits(v)) }

// launch starts kernel name on the default stream. Device goroutine only.
func (d *device) launch(name string, grid [3]int, block, shared int, args ...uint64) error {
	f, ok := d.fn[name]
	if !ok {
		return fmt.Errorf("%w: no kernel %s", ErrDevice, name)
	}
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	return derr(name, f.Launch(grid[0], grid[1], grid[2], block, 1, 1, shared, cu.Stream{}, params))
}

// stage copies host bytes into the scratch buffer (grown as needed) and
// returns its device address. The copy is synchronous and ordered after
// every kernel queued before it, so reusing the buffer for each operation
// is safe. Device goroutine only.
func (d *device) stage(b []byte) (cu.DevicePtr, error) {
	n := int64(len(b))
	if n == 0 {
		return 0, nil
	}
	if n > d.scrLen {
		if d.scratch != 0 {
			if err := cu.Synchronize(); err != nil {
				return 0, derr("synchronize", err)
			}
			if err := cu.MemFree(d.scratch); err != nil {
				return 0, derr("free scratch", err)
			}
			d.scratch, d.scrLen = 0, 0
		}
		size := max(n, 1<<20)
		p, err := cu.MemAlloc(size)
		if err != nil {
			return 0, derr("scratch", err)
		}
		d.scratch, d.scrLen = p, size
	}
	return d.scratch, derr("copy to device", cu.MemcpyHtoD(d.scratch, unsafe.Pointer(&b[0]), n))
}

// packer lays out several small host arrays in one buffer for one stage
// call; each starts 16-byte aligned.
type packer struct{ buf []byte }

func (p *packer) add(b []byte) int64 {
	for len(p.buf)%16 != 0 {
		p.buf = append(p.buf, 0)
	}
	off := int64(len(p.buf))
	p.buf = append(p.buf, b...)
	return off
}

func bytesOf[T int32 | int64 | uint64 | float64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}
