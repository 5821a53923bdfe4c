//go:build cuda

package cuda

import (
	"embed"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cloison/cloison/kernels"
)

func init() {
	kernels.Register(Name, func(o kernels.Options) (kernels.Backend, error) { return New(o) })
}

// New opens GPU o.Device (o.Threads is ignored). Errors wrap ErrDevice when
// the driver fails (no GPU, a driver too old for CUDA 11.8 PTX, a GPU below
// compute capability 8.0).
func New(o kernels.Options) (*Backend, error) {
	d, err := openDevice(o.Device)
	if err != nil {
		return nil, err
	}
	b := newBackend(d, o)
	b.devName, b.cc = d.name, d.cc
	return b, nil
}

// ptxFS holds the kernels compiled by `make cuda-ptx` (committed; `make
// cuda-check` fails when they are stale).
//
//go:embed ptx/kernels_sm80.ptx ptx/kernels_sm90.ptx
var ptxFS embed.FS

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
	ctx  cu.CUContext
	mod  cu.Module
	fn   map[string]cu.Function
	name string
	cc   [2]int
}

var _ executor = (*device)(nil)

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
	_ = protect(func() error { return d.ctx.Destroy() })
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
func (d *device) do(fn func(driver) error) error {
	res := make(chan error, 1)
	select {
	case d.work <- func() { res <- protect(func() error { return fn(cuDriver{d}) }) }:
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

// cuDriver is the driver on the device goroutine: every method is a
// gorgonia.org/cu call on the legacy default stream.
type cuDriver struct{ d *device }

func (c cuDriver) alloc(n int64) (uint64, error) {
	p, err := cu.MemAlloc(n)
	return uint64(p), derr(fmt.Sprintf("allocating %d bytes", n), err)
}

func (c cuDriver) free(p uint64) error {
	// cuMemFree may not wait for kernels still using the memory.
	if err := cu.Synchronize(); err != nil {
		return derr("synchronize", err)
	}
	return derr("free", cu.MemFree(cu.DevicePtr(p)))
}

func (c cuDriver) memset(p uint64, n int64) error {
	return derr("memset", cu.MemsetD8Async(cu.DevicePtr(p), 0, n, cu.Stream{}))
}

// htod and dtoh copy from and to pageable host memory: synchronous, and on
// the legacy default stream ordered after every kernel queued before.
func (c cuDriver) htod(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return derr("copy to device", cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src))))
}

func (c cuDriver) dtoh(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return derr("copy from device", cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst))))
}

func (c cuDriver) dtod(dst, src uint64, n int64) error {
	return derr("device copy", cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), n))
}

func (c cuDriver) sync() error { return derr("synchronize", cu.Synchronize()) }

func (c cuDriver) launch(name string, grid [3]int, block int, args ...uint64) error {
	f, ok := c.d.fn[name]
	if !ok {
		return fmt.Errorf("%w: no kernel %s", ErrDevice, name)
	}
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	return derr(name, f.Launch(grid[0], grid[1], grid[2], block, 1, 1, 0, cu.Stream{}, params))
}

// derr wraps a driver error of step what as ErrDevice.
func derr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %v", ErrDevice, what, err)
}
