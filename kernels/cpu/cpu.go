package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// Name is the name the backend registers under.
const Name = "cpu"

func init() {
	kernels.Register(Name, func(o kernels.Options) (kernels.Backend, error) { return New(o) })
}

// Backend is the pure-Go kernels.Backend. It implements kernels.MultiMatMuler.
type Backend struct {
	w          *workers
	k          *kset // the kernel path's functions
	closed     atomic.Bool
	unsafeSkip bool // Options.Unsafe: faults builds only
}

var (
	_ kernels.Backend       = (*Backend)(nil)
	_ kernels.MultiMatMuler = (*Backend)(nil)
)

// New returns a CPU backend with o.Threads worker threads (GOMAXPROCS when 0)
// on the kernel path CLOISON_CPU names (generic, avx2, avx512, amx, neon), or, when it
// is empty or "auto", the fastest path the CPU runs (the last of Paths).
//
// Errors: kernels.ErrShape for a negative thread count; ErrPath when
// CLOISON_CPU names an unknown path or one this CPU lacks.
func New(o kernels.Options) (*Backend, error) {
	p, err := choosePath(envPath(), available)
	if err != nil {
		return nil, err
	}
	return NewWithPath(o, p)
}

// NewWithPath is New on kernel path p, whatever CLOISON_CPU says (tests and
// benchmarks compare paths with it).
//
// Errors: as New; ErrPath when this CPU lacks p.
func NewWithPath(o kernels.Options, p Path) (*Backend, error) {
	n := o.Threads
	if n < 0 {
		return nil, fmt.Errorf("%w: %d threads", kernels.ErrShape, n)
	}
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if _, err := choosePath(string(p), available); err != nil || p == "" {
		return nil, fmt.Errorf("%w: path %q (this CPU runs %v)", ErrPath, p, available)
	}
	return &Backend{w: newWorkers(n), k: kernelSet(p), unsafeSkip: o.Unsafe.SkipOwnership()}, nil
}

// Path returns the kernel path the backend computes with, for logs and
// benchmark reports.
func (b *Backend) Path() Path { return b.k.path }

// Name returns "cpu".
func (b *Backend) Name() string { return Name }

// Threads returns the number of threads the backend computes with.
func (b *Backend) Threads() int { return b.w.n }

// Close stops the worker goroutines. Operations afterwards return
// kernels.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.w.close()
	}
	return nil
}

func (b *Backend) check() error {
	if b.closed.Load() {
		return kernels.ErrClosed
	}
	return nil
}

// tensor is a row-major rows×cols view of a float32 slice.
type tensor struct {
	b          *Backend
	rows, cols int
	data       []float32 // len rows*cols
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }
func (t *tensor) row(r int) []float32 {
	return t.data[r*t.cols : (r+1)*t.cols : (r+1)*t.cols]
}

func (t *tensor) Slice(r0, r1 int) kernels.Tensor {
	if r0 < 0 || r1 < r0 || r1 > t.rows {
		panic(fmt.Sprintf("kernels/cpu: slice [%d:%d] of a tensor with %d rows", r0, r1, t.rows))
	}
	return &tensor{b: t.b, rows: r1 - r0, cols: t.cols, data: t.data[r0*t.cols : r1*t.cols : r1*t.cols]}
}

// Data returns the float32 storage of a tensor made by a CPU backend (the
// tensor itself; not a copy), for tests and host-side samplers.
func Data(t kernels.Tensor) []float32 {
	if ct, ok := t.(*tensor); ok {
		return ct.data
	}
	return nil
}

func (b *Backend) tensor(t kernels.Tensor, what string) (*tensor, error) {
	ct, ok := t.(*tensor)
	if !ok || ct == nil || ct.b != b {
		return nil, fmt.Errorf("%w: %s is not a tensor of this cpu backend", kernels.ErrShape, what)
	}
	return ct, nil
}

// NewTensor allocates a zeroed rows×cols tensor.
func (b *Backend) NewTensor(rows, cols int) (kernels.Tensor, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if rows < 0 || cols <= 0 || int64(rows)*int64(cols) > 1<<40 {
		return nil, fmt.Errorf("%w: tensor %d×%d", kernels.ErrShape, rows, cols)
	}
	return &tensor{b: b, rows: rows, cols: cols, data: make([]float32, rows*cols)}, nil
}

// Upload copies src into t.
func (b *Backend) Upload(t kernels.Tensor, src []float32) error {
	ct, err := b.tensor(t, "upload target")
	if err != nil {
		return err
	}
	if len(src) != len(ct.data) {
		return fmt.Errorf("%w: upload of %d floats into a %d×%d tensor", kernels.ErrShape, len(src), ct.rows, ct.cols)
	}
	copy(ct.data, src)
	return nil
}

// Download copies t into dst.
func (b *Backend) Download(dst []float32, t kernels.Tensor) error {
	ct, err := b.tensor(t, "download source")
	if err != nil {
		return err
	}
	if len(dst) != len(ct.data) {
		return fmt.Errorf("%w: download of a %d×%d tensor into %d floats", kernels.ErrShape, ct.rows, ct.cols, len(dst))
	}
	copy(dst, ct.data)
	return nil
}

// Free drops the tensor's storage (the garbage collector reclaims it).
func (b *Backend) Free(t kernels.Tensor) {}

// matrix is a GGUF weight matrix; data is used in place.
type matrix struct {
	b          *Backend
	dt         kernels.DType
	rows, cols int
	rowBytes   int
	data       []byte
	f32        []float32 // F32 weights, viewing data when aligned, else a copy
	u16        []uint16  // F16 and BF16 weights, likewise
	q4x        []byte    // Q4_K rows interleaved four at a time (q4kx.go), where the path decodes them so
	q4xOnce    sync.Once // makes q4x on the first product (interleaved)
}

func (m *matrix) DType() kernels.DType { return m.dt }
func (m *matrix) Rows() int            { return m.rows }
func (m *matrix) Cols() int            { return m.cols }

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// NewMatrix wraps GGUF weight bytes; F32, F16 and BF16 data that is aligned
// (as GGUF tensor data is) is used in place, everything else is used as is.
func (b *Backend) NewMatrix(dt kernels.DType, rows, cols int, data []byte) (kernels.Matrix, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if rows <= 0 || int64(rows)*int64(rb) != int64(len(data)) {
		return nil, fmt.Errorf("%w: %d×%d %v matrix needs %d bytes, have %d", kernels.ErrShape, rows, cols, dt, int64(rows)*int64(rb), len(data))
	}
	m := &matrix{b: b, dt: dt, rows: rows, cols: cols, rowBytes: rb, data: data}
	switch dt {
	case kernels.F32:
		if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 == 0 {
			m.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/4)
		} else {
			m.f32 = make([]float32, rows*cols)
			for i := range m.f32 {
				m.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
	case kernels.F16, kernels.BF16:
		if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%2 == 0 {
			m.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/2)
		} else {
			m.u16 = make([]uint16, rows*cols)
			for i := range m.u16 {
				m.u16[i] = binary.LittleEndian.Uint16(data[2*i:])
			}
		}
	}
	return m, nil
}

func (b *Backend) matrix(w kernels.Matrix) (*matrix, error) {
	m, ok := w.(*matrix)
	if !ok || m == nil || m.b != b {
		return nil, fmt.Errorf("%w: weight is not a matrix of this cpu backend", kernels.ErrShape)
	}
	return m, nil
}

// dequantRow decodes row r of m into dst (len m.cols).
func (m *matrix) dequantRow(dst []float32, r int) {
	switch m.dt {
	case kernels.F32:
		copy(dst, m.f32[r*m.cols:(r+1)*m.cols])
	case kernels.F16:
		src := m.u16[r*m.cols : (r+1)*m.cols]
		dst = dst[:len(src)]
		for i, h := range src {
			dst[i] = f16tab[h]
		}
	case kernels.BF16:
		src := m.u16[r*m.cols : (r+1)*m.cols]
		dst = dst[:len(src)]
		for i, h := range src {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
	case kernels.Q8_0:
		row := m.data[r*m.rowBytes : (r+1)*m.rowBytes]
		for b := 0; b < m.cols/32; b++ {
			blk := row[b*34 : b*34+34 : b*34+34]
			d := f16tab[uint16(blk[0])|uint16(blk[1])<<8]
			y := dst[b*32 : b*32+32 : b*32+32]
			q := blk[2:34]
			for j := range y {
				y[j] = float32(int8(q[j])) * d
			}
		}
	case kernels.Q4_K:
		row := m.data[r*m.rowBytes : (r+1)*m.rowBytes]
		for b := 0; b < m.cols/256; b++ {
			dequantQ4K((*[256]float32)(dst[b*256:]), (*[144]byte)(row[b*144:]))
		}
	case kernels.Q6_K:
		row := m.data[r*m.rowBytes : (r+1)*m.rowBytes]
		for b := 0; b < m.cols/256; b++ {
			kernels.DequantizeQ6KBlock(dst[b*256:b*256+256], row[b*210:b*210+210])
		}
	default:
		row := m.data[r*m.rowBytes : (r+1)*m.rowBytes]
		// Dequantize only fails on a length mismatch, ruled out by NewMatrix.
		_ = kernels.Dequantize(dst[:m.cols], m.dt, row)
	}
}

var f16tab = func() *[65536]float32 {
	var t [65536]float32
	for i := range t {
		t[i] = kernels.F16ToF32(uint16(i))
	}
	return &t
}()

func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kernels.ErrShape}, args...)...)
}

// dequantQ4K decodes a Q4_K super-block with the values of
// kernels.DequantizeQ4KBlock: per 32-element sub-block the 16 possible
// values d·sc·q − dmin·m are computed once (with the same float32 roundings)
// and looked up.
func dequantQ4K(y *[256]float32, blk *[144]byte) {
	d := f16tab[uint16(blk[0])|uint16(blk[1])<<8]
	dmin := f16tab[uint16(blk[2])|uint16(blk[3])<<8]
	scales := blk[4:16]
	var lo, hi [16]float32
	for j := range 4 {
		sc, m := kernels.Q4KScaleMin(2*j, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = kernels.Q4KScaleMin(2*j+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for q := range 16 {
			lo[q] = d1*float32(q) - m1
			hi[q] = d2*float32(q) - m2
		}
		qs := (*[32]byte)(blk[16+32*j:])
		out := (*[64]float32)(y[64*j:])
		for l, b := range qs {
			out[l] = lo[b&15]
			out[32+l] = hi[b>>4]
		}
	}
}
