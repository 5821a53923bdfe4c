package cuda

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/cloison/cloison/kernels"
)

// Backend is the CUDA kernels.Backend (New, in builds with the cuda tag).
// See the package documentation.
type Backend struct {
	ex         executor
	scr        scratch // used only inside ex.do
	closed     atomic.Bool
	unsafeSkip bool // Options.Unsafe: faults builds only
	devName    string
	cc         [2]int
}

var _ kernels.Backend = (*Backend)(nil)

func newBackend(ex executor, o kernels.Options) *Backend {
	return &Backend{ex: ex, unsafeSkip: o.Unsafe.SkipOwnership()}
}

// Name returns "cuda".
func (b *Backend) Name() string { return Name }

// Device returns the GPU's name and compute capability.
func (b *Backend) Device() (name string, major, minor int) {
	return b.devName, b.cc[0], b.cc[1]
}

// Close destroys the context after the work queued before it; operations
// afterwards return kernels.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.ex.close()
	}
	return nil
}

// do runs fn against the device, after every fn before it.
func (b *Backend) do(fn func(d driver) error) error {
	if b.closed.Load() {
		return kernels.ErrClosed
	}
	return b.ex.do(fn)
}

// tensor is a rows×cols float32 matrix in device memory at ptr.
type tensor struct {
	b          *Backend
	ptr        uint64 // 0 for an empty tensor
	rows, cols int
	view       bool // a Slice: Free is a no-op
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

func (t *tensor) Slice(r0, r1 int) kernels.Tensor {
	if r0 < 0 || r1 < r0 || r1 > t.rows {
		panic(fmt.Sprintf("kernels/cuda: slice [%d:%d] of a tensor with %d rows", r0, r1, t.rows))
	}
	return &tensor{b: t.b, ptr: t.ptr + uint64(4*r0*t.cols), rows: r1 - r0, cols: t.cols, view: true}
}

func (t *tensor) len() int         { return t.rows * t.cols }
func (t *tensor) bytes() int64     { return 4 * int64(t.len()) }
func (t *tensor) row(r int) uint64 { return uint64(t.ptr) + uint64(4*r*t.cols) }

// overlaps reports whether two tensors share device memory.
func overlaps(a, b *tensor) bool {
	if a.len() == 0 || b.len() == 0 {
		return false
	}
	return a.ptr < b.ptr+uint64(b.bytes()) && b.ptr < a.ptr+uint64(a.bytes())
}

func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kernels.ErrShape}, args...)...)
}

func (b *Backend) tensor(t kernels.Tensor, what string) (*tensor, error) {
	ct, ok := t.(*tensor)
	if !ok || ct == nil || ct.b != b {
		return nil, shapeErr("%s is not a tensor of this cuda backend", what)
	}
	return ct, nil
}

func (b *Backend) sameShape(what string, ts ...kernels.Tensor) ([]*tensor, error) {
	if b.closed.Load() {
		return nil, kernels.ErrClosed
	}
	out := make([]*tensor, len(ts))
	for i, t := range ts {
		ct, err := b.tensor(t, what)
		if err != nil {
			return nil, err
		}
		if i > 0 && (ct.rows != out[0].rows || ct.cols != out[0].cols) {
			return nil, shapeErr("%s of %d×%d and %d×%d tensors", what, out[0].rows, out[0].cols, ct.rows, ct.cols)
		}
		out[i] = ct
	}
	return out, nil
}

// NewTensor allocates a zeroed rows×cols tensor in device memory.
func (b *Backend) NewTensor(rows, cols int) (kernels.Tensor, error) {
	if rows < 0 || cols <= 0 || int64(rows)*int64(cols) > 1<<40 {
		return nil, shapeErr("tensor %d×%d", rows, cols)
	}
	t := &tensor{b: b, rows: rows, cols: cols}
	if rows == 0 {
		return t, nil
	}
	err := b.do(func(dv driver) error {
		p, err := dv.alloc(t.bytes())
		if err != nil {
			return err
		}
		t.ptr = p
		return dv.memset(p, t.bytes())
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Upload copies src into t.
func (b *Backend) Upload(t kernels.Tensor, src []float32) error {
	ct, err := b.tensor(t, "upload target")
	if err != nil {
		return err
	}
	if len(src) != ct.len() {
		return shapeErr("upload of %d floats into a %d×%d tensor", len(src), ct.rows, ct.cols)
	}
	if len(src) == 0 {
		return nil
	}
	return b.do(func(dv driver) error {
		return dv.htod(ct.ptr, bytesOf(src))
	})
}

// Download copies t into dst after every operation queued before it; it
// returns the error of any of them that failed on the device.
func (b *Backend) Download(dst []float32, t kernels.Tensor) error {
	ct, err := b.tensor(t, "download source")
	if err != nil {
		return err
	}
	if len(dst) != ct.len() {
		return shapeErr("download of a %d×%d tensor into %d floats", ct.rows, ct.cols, len(dst))
	}
	return b.do(func(dv driver) error {
		if len(dst) == 0 {
			return dv.sync()
		}
		return dv.dtoh(bytesOf(dst), ct.ptr)
	})
}

// Free releases t's device memory once the work queued before it is done.
func (b *Backend) Free(t kernels.Tensor) {
	ct, ok := t.(*tensor)
	if !ok || ct == nil || ct.b != b || ct.view || ct.ptr == 0 {
		return
	}
	p := ct.ptr
	ct.ptr = 0
	_ = b.do(func(dv driver) error {
		return dv.free(p)
	})
}

// matrix is a weight matrix in device memory: F32, F16, BF16, Q8_0 and Q4_0
// in their GGUF bytes; Q4_K and Q6_K dequantized to F32 at upload (dt
// keeps the caller's type, dev the stored one).
type matrix struct {
	b          *Backend
	dt, dev    kernels.DType
	rows, cols int
	rowBytes   int64 // of the stored type
	ptr        uint64
}

func (m *matrix) DType() kernels.DType { return m.dt }
func (m *matrix) Rows() int            { return m.rows }
func (m *matrix) Cols() int            { return m.cols }

// native reports whether the device kernels decode dt themselves.
func native(dt kernels.DType) bool {
	switch dt {
	case kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0:
		return true
	}
	return false
}

// NewMatrix copies GGUF weight bytes to the device (data is not kept).
func (b *Backend) NewMatrix(dt kernels.DType, rows, cols int, data []byte) (kernels.Matrix, error) {
	if b.closed.Load() {
		return nil, kernels.ErrClosed
	}
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if rows <= 0 || int64(rows)*int64(rb) != int64(len(data)) {
		return nil, shapeErr("%d×%d %v matrix needs %d bytes, have %d", rows, cols, dt, int64(rows)*int64(rb), len(data))
	}
	m := &matrix{b: b, dt: dt, dev: dt, rows: rows, cols: cols, rowBytes: int64(rb)}
	src := data
	if !native(dt) {
		f := make([]float32, rows*cols)
		if err := kernels.Dequantize(f, dt, data); err != nil {
			return nil, err
		}
		src = bytesOf(f)
		m.dev, m.rowBytes = kernels.F32, 4*int64(cols)
	}
	err = b.do(func(dv driver) error {
		p, err := dv.alloc(int64(len(src)))
		if err != nil {
			return err
		}
		m.ptr = p
		return dv.htod(p, src)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (b *Backend) matrix(w kernels.Matrix) (*matrix, error) {
	m, ok := w.(*matrix)
	if !ok || m == nil || m.b != b {
		return nil, shapeErr("weight is not a matrix of this cuda backend")
	}
	return m, nil
}

const mmRows = 8 // MM_ROWS in kernels.cu

// MatMul sets dst = x·wᵀ.
func (b *Backend) MatMul(dst, x kernels.Tensor, w kernels.Matrix) error {
	if b.closed.Load() {
		return kernels.ErrClosed
	}
	xt, err := b.tensor(x, "matmul input")
	if err != nil {
		return err
	}
	m, err := b.matrix(w)
	if err != nil {
		return err
	}
	d, err := b.tensor(dst, "matmul output")
	if err != nil {
		return err
	}
	if m.cols != xt.cols || d.rows != xt.rows || d.cols != m.rows {
		return shapeErr("matmul %d×%d · (%d×%d)ᵀ into %d×%d", xt.rows, xt.cols, m.rows, m.cols, d.rows, d.cols)
	}
	if overlaps(d, xt) {
		return shapeErr("matmul output aliases its input")
	}
	if xt.rows == 0 {
		return nil
	}
	return b.do(func(dv driver) error {
		grid := [3]int{(m.rows + 7) / 8, (xt.rows + mmRows - 1) / mmRows, 1}
		return dv.launch("matmul", grid, 256, ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(m.ptr),
			intArg(int(m.dev)), intArg(xt.rows), intArg(xt.cols), intArg(m.rows), longArg(m.rowBytes))
	})
}

// Embed sets dst row r to row ids[r] of w.
func (b *Backend) Embed(dst kernels.Tensor, w kernels.Matrix, ids []int32) error {
	if b.closed.Load() {
		return kernels.ErrClosed
	}
	d, err := b.tensor(dst, "embedding output")
	if err != nil {
		return err
	}
	m, err := b.matrix(w)
	if err != nil {
		return err
	}
	if d.rows != len(ids) || d.cols != m.cols {
		return shapeErr("embedding of %d ids (width %d) into %d×%d", len(ids), m.cols, d.rows, d.cols)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.rows {
			return shapeErr("token id %d outside the vocabulary of %d", id, m.rows)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return b.do(func(dv driver) error {
		p, err := b.scr.stage(dv, bytesOf(ids))
		if err != nil {
			return err
		}
		return dv.launch("embed", [3]int{d.rows, (d.cols + 255) / 256, 1}, 256,
			ptrArg(d.ptr), ptrArg(m.ptr), ptrArg(p), intArg(int(m.dev)), intArg(d.cols), longArg(m.rowBytes))
	})
}

// RMSNorm sets dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ weight, per group
// of weight.Cols() elements (see kernels.Backend).
func (b *Backend) RMSNorm(dst, x, weight kernels.Tensor, eps float32) error {
	ts, err := b.sameShape("rmsnorm", dst, x)
	if err != nil {
		return err
	}
	w, err := b.tensor(weight, "rmsnorm weight")
	if err != nil {
		return err
	}
	d, xt := ts[0], ts[1]
	if w.rows != 1 || w.cols == 0 || xt.cols%w.cols != 0 {
		return shapeErr("rmsnorm weight %d×%d for rows of %d", w.rows, w.cols, xt.cols)
	}
	if !(eps >= 0) {
		return shapeErr("rmsnorm eps %v", eps)
	}
	if xt.rows == 0 {
		return nil
	}
	// Rows are contiguous, so rows×cols normalised in groups of g is the
	// kernel's (rows·cols/g)×g: one block per group.
	groups := xt.rows * (xt.cols / w.cols)
	return b.do(func(dv driver) error {
		return dv.launch("rmsnorm", [3]int{groups, 1, 1}, 256,
			ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(w.ptr), intArg(w.cols), floatArg(eps))
	})
}

// RoPE rotates x in place. The frequencies are computed on the host in
// float64 exactly as kernels/cpu does; angles and their sines in float64 on
// the device, the rotation in float32.
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, p kernels.RoPE) error {
	if b.closed.Load() {
		return kernels.ErrClosed
	}
	xt, err := b.tensor(x, "rope input")
	if err != nil {
		return err
	}
	dims, err := p.Check(xt.cols, xt.rows, len(pos))
	if err != nil {
		return err
	}
	if xt.rows == 0 {
		return nil
	}
	scale := float64(p.Scale)
	if scale == 0 {
		scale = 1
	}
	half := dims / 2
	freq := make([]float64, half)
	for i := range freq {
		freq[i] = scale * math.Pow(float64(p.Base), -2*float64(i)/float64(dims))
		if p.Factors != nil {
			freq[i] /= float64(p.Factors[i])
		}
	}
	var pk packer
	po := pk.add(bytesOf(pos))
	fo := pk.add(bytesOf(freq))
	neox := 0
	if p.NeoX {
		neox = 1
	}
	return b.do(func(dv driver) error {
		s, err := b.scr.stage(dv, pk.buf)
		if err != nil {
			return err
		}
		return dv.launch("rope", [3]int{xt.rows, 1, 1}, 128, ptrArg(xt.ptr), ptrArg(s+po),
			ptrArg(s+fo), intArg(xt.cols), intArg(p.HeadDim), intArg(half), intArg(neox))
	})
}

// elementwise launches an elementwise kernel over n elements.
func (b *Backend) elementwise(name string, n int, args ...uint64) error {
	if n == 0 {
		return nil
	}
	blocks := min((n+255)/256, 4096)
	return b.do(func(dv driver) error { return dv.launch(name, [3]int{blocks, 1, 1}, 256, args...) })
}

// SwiGLU sets dst = silu(gate) ⊙ up.
func (b *Backend) SwiGLU(dst, gate, up kernels.Tensor) error {
	ts, err := b.sameShape("swiglu", dst, gate, up)
	if err != nil {
		return err
	}
	n := ts[0].len()
	return b.elementwise("swiglu", n, ptrArg(ts[0].ptr), ptrArg(ts[1].ptr), ptrArg(ts[2].ptr), longArg(int64(n)))
}

// SiLU sets dst = x·sigmoid(x).
func (b *Backend) SiLU(dst, x kernels.Tensor) error {
	ts, err := b.sameShape("silu", dst, x)
	if err != nil {
		return err
	}
	n := ts[0].len()
	return b.elementwise("silu_op", n, ptrArg(ts[0].ptr), ptrArg(ts[1].ptr), longArg(int64(n)))
}

// Softmax replaces each row of x by its softmax.
func (b *Backend) Softmax(x kernels.Tensor) error {
	ts, err := b.sameShape("softmax", x)
	if err != nil {
		return err
	}
	xt := ts[0]
	if xt.rows == 0 {
		return nil
	}
	return b.do(func(dv driver) error {
		return dv.launch("softmax", [3]int{xt.rows, 1, 1}, 256, ptrArg(xt.ptr), intArg(xt.cols))
	})
}

// Add sets dst = a + b, b broadcast when it has one row.
func (b *Backend) Add(dst, a, bt kernels.Tensor) error {
	ts, err := b.sameShape("add", dst, a)
	if err != nil {
		return err
	}
	d, at := ts[0], ts[1]
	c, err := b.tensor(bt, "add operand")
	if err != nil {
		return err
	}
	if c.cols != at.cols || (c.rows != at.rows && c.rows != 1) {
		return shapeErr("add of %d×%d and %d×%d", at.rows, at.cols, c.rows, c.cols)
	}
	n := d.len()
	return b.elementwise("add", n, ptrArg(d.ptr), ptrArg(at.ptr), ptrArg(c.ptr), longArg(int64(n)), intArg(d.cols), intArg(c.rows))
}

// Copy copies src into dst.
func (b *Backend) Copy(dst, src kernels.Tensor) error {
	ts, err := b.sameShape("copy", dst, src)
	if err != nil {
		return err
	}
	if ts[0].len() == 0 || ts[0].ptr == ts[1].ptr {
		return nil
	}
	d, s := ts[0], ts[1]
	return b.do(func(dv driver) error {
		if !overlaps(d, s) {
			return dv.dtod(d.ptr, s.ptr, d.bytes())
		}
		// Overlapping views of one tensor (same width, whole rows apart):
		// row by row, in the order that reads each row before it is
		// overwritten, as copy does.
		rb := int64(4 * d.cols)
		for i := range d.rows {
			r := i
			if d.ptr > s.ptr {
				r = d.rows - 1 - i
			}
			if err := dv.dtod(d.ptr+uint64(int64(r)*rb), s.ptr+uint64(int64(r)*rb), rb); err != nil {
				return err
			}
		}
		return nil
	})
}
