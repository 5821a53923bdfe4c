package cuda

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"unsafe"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/kernelstest"
)

// emu is a driver that runs Go ports of the kernels in kernels.cu on host
// memory, so that everything above the driver — the host checks, the launch
// plans, argument lists and grids, pointer arithmetic, the transfer format —
// runs the kernelstest suite without a GPU. The ports follow the CUDA code
// thread by thread where it decides the result (per-lane column sets, the
// butterfly warp sum, the block reduction trees, the attention warps' online
// softmax and merge). It is no substitute for running on a GPU: it checks
// the host side and the algorithms, not the CUDA C transcription nor the
// driver.
//
// Memory: every allocation gets its own address range with a guard gap, so
// an offset outside an allocation panics (an ErrDevice error through
// protect) instead of reading a neighbour. Launches are checked against the
// CUDA limits (no empty grid, grid y and z ≤ 65535, block ≤ 1024).
type emu struct {
	mu     sync.Mutex
	allocs []*emuAlloc // sorted by base
	next   uint64
	// launches counts launches per kernel (tests check the device path
	// was taken).
	launches map[string]int
}

type emuAlloc struct {
	base uint64
	mem  []byte // 8-byte aligned
}

var _ executor = (*emu)(nil)

func newEmu() *emu { return &emu{next: 1 << 32, launches: map[string]int{}} }

func (e *emu) do(fn func(driver) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return protect(func() error { return fn(emuDriver{e}) })
}

func (e *emu) close() {}

// newEmulated returns a Backend whose driver is the emulator.
func newEmulated(t testing.TB, o kernels.Options) (*Backend, *emu) {
	e := newEmu()
	b := newBackend(e, o)
	t.Cleanup(func() { b.Close() })
	return b, e
}

// TestEmulatedConformance runs the kernelstest suite through the whole host
// side of the backend, with the kernels run by their Go ports.
func TestEmulatedConformance(t *testing.T) {
	b, e := newEmulated(t, kernels.Options{})
	kernelstest.Run(t, b)
	for _, name := range kernelNames {
		if e.launches[name] == 0 {
			t.Errorf("kernel %s never launched", name)
		}
	}
}

func TestEmulatedAgainstCPU(t *testing.T) {
	b, _ := newEmulated(t, kernels.Options{})
	testAgainstCPU(t, b)
}

func TestEmulatedModelAgainstCPU(t *testing.T) {
	b, _ := newEmulated(t, kernels.Options{})
	testModelAgainstCPU(t, b)
}

func TestEmulatedPanicBecomesError(t *testing.T) {
	b, _ := newEmulated(t, kernels.Options{})
	testPanicBecomesError(t, b)
}

func TestEmulatedDeviceTagMismatch(t *testing.T) {
	b, e := newEmulated(t, kernels.Options{})
	testDeviceTagMismatch(t, b)
	if e.launches["paged_attention_check"] == 0 {
		t.Fatal("the device check never ran")
	}
}

type emuDriver struct{ e *emu }

func (d emuDriver) alloc(n int64) (uint64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: alloc of %d bytes", ErrDevice, n)
	}
	words := make([]uint64, (n+7)/8)
	a := &emuAlloc{base: d.e.next, mem: unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)}
	d.e.next += uint64(n+255)/256*256 + 4096
	d.e.allocs = append(d.e.allocs, a)
	return a.base, nil
}

func (d emuDriver) find(p uint64) (*emuAlloc, int) {
	i := sort.Search(len(d.e.allocs), func(i int) bool { return d.e.allocs[i].base > p }) - 1
	if i < 0 {
		panic(fmt.Sprintf("emu: address %#x outside any allocation", p))
	}
	return d.e.allocs[i], i
}

// bytes returns n bytes at p; it panics when they leave p's allocation.
func (d emuDriver) bytes(p uint64, n int64) []byte {
	if n == 0 {
		return nil
	}
	a, _ := d.find(p)
	off := p - a.base
	if off+uint64(n) > uint64(len(a.mem)) {
		panic(fmt.Sprintf("emu: %d bytes at %#x overrun an allocation of %d at %#x", n, p, len(a.mem), a.base))
	}
	return a.mem[off : off+uint64(n)]
}

func view[T float32 | int32 | int64 | uint64 | float64](d emuDriver, p uint64, n int) []T {
	if n == 0 {
		return nil
	}
	var z T
	b := d.bytes(p, int64(n)*int64(unsafe.Sizeof(z)))
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Sizeof(z) != 0 {
		panic(fmt.Sprintf("emu: misaligned %T access at %#x", z, p))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func (d emuDriver) free(p uint64) error {
	a, i := d.find(p)
	if a.base != p {
		return fmt.Errorf("%w: free of %#x, not an allocation", ErrDevice, p)
	}
	d.e.allocs = append(d.e.allocs[:i], d.e.allocs[i+1:]...)
	return nil
}

func (d emuDriver) memset(p uint64, n int64) error { clear(d.bytes(p, n)); return nil }
func (d emuDriver) htod(dst uint64, src []byte) error {
	copy(d.bytes(dst, int64(len(src))), src)
	return nil
}
func (d emuDriver) dtoh(dst []byte, src uint64) error {
	copy(dst, d.bytes(src, int64(len(dst))))
	return nil
}
func (d emuDriver) dtod(dst, src uint64, n int64) error {
	copy(d.bytes(dst, n), d.bytes(src, n))
	return nil
}
func (d emuDriver) sync() error { return nil }

// args decodes a kernel's parameters as the driver would.
type args []uint64

func (a args) ptr(i int) uint64                   { return a[i] }
func (a args) int(i int) int                      { return int(int32(uint32(a[i]))) }
func (a args) long(i int) int64                   { return int64(a[i]) }
func (a args) f32(i int) float32                  { return math.Float32frombits(uint32(a[i])) }
func f32s(d emuDriver, p uint64, n int) []float32 { return view[float32](d, p, n) }
func i32s(d emuDriver, p uint64, n int) []int32   { return view[int32](d, p, n) }

func (d emuDriver) launch(name string, grid [3]int, block int, a ...uint64) error {
	if grid[0] < 1 || grid[1] < 1 || grid[2] < 1 || grid[0] > math.MaxInt32 || grid[1] > 65535 || grid[2] > 65535 || block < 1 || block > 1024 {
		return fmt.Errorf("%w: %s: invalid launch %v×%d", ErrDevice, name, grid, block)
	}
	want := map[string]int{
		"matmul": 8, "embed": 6, "rmsnorm": 5, "rope": 7, "swiglu": 4, "silu_op": 3, "add": 6,
		"softmax": 2, "write_kv": 6, "paged_attention_check": 6, "paged_attention": 19,
	}
	if n, ok := want[name]; !ok || n != len(a) {
		return fmt.Errorf("%w: %s with %d arguments (kernels.cu takes %d)", ErrDevice, name, len(a), n)
	}
	d.e.launches[name]++
	switch name {
	case "matmul":
		emuMatmul(d, grid, block, args(a))
	case "embed":
		emuEmbed(d, grid, block, args(a))
	case "rmsnorm":
		emuRMSNorm(d, grid, block, args(a))
	case "rope":
		emuRoPE(d, grid, block, args(a))
	case "swiglu", "silu_op", "add":
		emuElementwise(d, name, args(a))
	case "softmax":
		emuSoftmax(d, grid, block, args(a))
	case "write_kv":
		emuWriteKV(d, grid, args(a))
	case "paged_attention_check":
		emuAttentionCheck(d, grid, block, args(a))
	case "paged_attention":
		emuAttention(d, grid, block, args(a))
	}
	return nil
}

// --- ports of kernels.cu ------------------------------------------------

func fmaf(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
func expf(x float32) float32       { return float32(math.Exp(float64(x))) }

// warpSum is warp_sum: the xor butterfly over 32 lanes; lane 0's value.
func warpSum(v [32]float32) float32 {
	for m := 16; m > 0; m >>= 1 {
		var n [32]float32
		for l := range v {
			n[l] = v[l] + v[l^m]
		}
		v = n
	}
	return v[0]
}

func halfAt(b []byte) float32 { return f16(uint16(b[0]) | uint16(b[1])<<8) }

func f16(h uint16) float32 {
	// Exact IEEE half → float32 (as __half2float).
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0:
		return float32(math.Copysign(float64(mant)*math.Pow(2, -24), float64(int32(sign))))
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// weight is weight() of kernels.cu: element i of a row at p.
func weight(d emuDriver, p uint64, dt int, i int64) float32 {
	switch dt {
	case 0:
		return f32s(d, p+uint64(4*i), 1)[0]
	case 1:
		return halfAt(d.bytes(p+uint64(2*i), 2))
	case 30:
		b := d.bytes(p+uint64(2*i), 2)
		return math.Float32frombits(uint32(uint16(b[0])|uint16(b[1])<<8) << 16)
	case 8:
		blk := d.bytes(p+uint64(i/32*34), 34)
		return float32(int8(blk[2+i%32])) * halfAt(blk)
	case 2:
		blk := d.bytes(p+uint64(i/32*18), 18)
		j := i % 32
		var q int
		if j < 16 {
			q = int(blk[2+j] & 15)
		} else {
			q = int(blk[2+j-16] >> 4)
		}
		return float32(q-8) * halfAt(blk)
	}
	panic(fmt.Sprintf("emu: weight of dtype %d", dt))
}

func emuMatmul(d emuDriver, grid [3]int, block int, a args) {
	dst, x, w := a.ptr(0), a.ptr(1), a.ptr(2)
	dt, rows, cols, out, rowBytes := a.int(3), a.int(4), a.int(5), a.int(6), a.long(7)
	const mmRows = 8
	warps := block / 32
	for bx := range grid[0] {
		for by := range grid[1] {
			for wp := range warps {
				o := bx*warps + wp
				r0 := by * mmRows
				if o >= out {
					continue
				}
				nr := min(mmRows, rows-r0)
				var acc [mmRows][32]float32
				for lane := range 32 {
					for i := int64(lane); i < int64(cols); i += 32 {
						wv := weight(d, w+uint64(int64(o)*rowBytes), dt, i)
						for k := range nr {
							xv := f32s(d, x+uint64(4*(int64(r0+k)*int64(cols)+i)), 1)[0]
							acc[k][lane] = fmaf(xv, wv, acc[k][lane])
						}
					}
				}
				for k := range nr {
					f32s(d, dst+uint64(4*(int64(r0+k)*int64(out)+int64(o))), 1)[0] = warpSum(acc[k])
				}
			}
		}
	}
}

func emuEmbed(d emuDriver, grid [3]int, block int, a args) {
	dst, w, ids := a.ptr(0), a.ptr(1), a.ptr(2)
	dt, cols, rowBytes := a.int(3), a.int(4), a.long(5)
	for r := range grid[0] {
		id := i32s(d, ids+uint64(4*r), 1)[0]
		for i := range min(cols, grid[1]*block) {
			f32s(d, dst+uint64(4*(r*cols+i)), 1)[0] = weight(d, w+uint64(int64(id)*rowBytes), dt, int64(i))
		}
	}
}

// blockSum is block_sum_d: the shared-memory tree over block threads.
func blockSum(v []float64) float64 {
	for s := len(v) / 2; s > 0; s >>= 1 {
		for t := range s {
			v[t] += v[t+s]
		}
	}
	return v[0]
}

func blockMax(v []float32) float32 {
	for s := len(v) / 2; s > 0; s >>= 1 {
		for t := range s {
			v[t] = max(v[t], v[t+s])
		}
	}
	return v[0]
}

func emuRMSNorm(d emuDriver, grid [3]int, block int, a args) {
	cols, eps := a.int(3), a.f32(4)
	w := f32s(d, a.ptr(2), cols)
	for r := range grid[0] {
		in := f32s(d, a.ptr(1)+uint64(4*r*cols), cols)
		out := f32s(d, a.ptr(0)+uint64(4*r*cols), cols)
		part := make([]float64, block)
		for t := range block {
			for i := t; i < cols; i += block {
				part[t] += float64(in[i]) * float64(in[i])
			}
		}
		s := blockSum(part)
		scale := float32(1 / math.Sqrt(s/float64(cols)+float64(eps)))
		for i := range cols {
			out[i] = float32(in[i]*scale) * w[i]
		}
	}
}

func emuRoPE(d emuDriver, grid [3]int, block int, a args) {
	cols, hd, half, neox := a.int(3), a.int(4), a.int(5), a.int(6)
	pos := i32s(d, a.ptr(1), grid[0])
	freq := view[float64](d, a.ptr(2), half)
	for r := range grid[0] {
		row := f32s(d, a.ptr(0)+uint64(4*r*cols), cols)
		for t := 0; t < cols/hd*half; t++ {
			h, i := t/half, t%half
			sd, cd := math.Sincos(float64(pos[r]) * freq[i])
			c, s := float32(cd), float32(sd)
			x0i, x1i := 2*i, 2*i+1
			if neox != 0 {
				x0i, x1i = i, i+half
			}
			head := row[h*hd : (h+1)*hd]
			x0, x1 := head[x0i], head[x1i]
			head[x0i] = float32(x0*c) - float32(x1*s)
			head[x1i] = float32(x0*s) + float32(x1*c)
		}
	}
}

func silu(v float32) float32 { return v / float32(1+expf(-v)) }

func emuElementwise(d emuDriver, name string, a args) {
	switch name {
	case "swiglu":
		n := int(a.long(3))
		dst, g, u := f32s(d, a.ptr(0), n), f32s(d, a.ptr(1), n), f32s(d, a.ptr(2), n)
		for i := range n {
			dst[i] = silu(g[i]) * u[i]
		}
	case "silu_op":
		n := int(a.long(2))
		dst, x := f32s(d, a.ptr(0), n), f32s(d, a.ptr(1), n)
		for i := range n {
			dst[i] = silu(x[i])
		}
	case "add":
		n, cols, bRows := int(a.long(3)), a.int(4), a.int(5)
		dst, x := f32s(d, a.ptr(0), n), f32s(d, a.ptr(1), n)
		bn := n
		if bRows == 1 {
			bn = cols
		}
		y := f32s(d, a.ptr(2), bn)
		for i := range n {
			j := i
			if bRows == 1 {
				j = i % cols
			}
			dst[i] = x[i] + y[j]
		}
	}
}

func emuSoftmax(d emuDriver, grid [3]int, block int, a args) {
	cols := a.int(1)
	for r := range grid[0] {
		row := f32s(d, a.ptr(0)+uint64(4*r*cols), cols)
		mx := make([]float32, block)
		for t := range block {
			mx[t] = float32(math.Inf(-1))
			for i := t; i < cols; i += block {
				mx[t] = max(mx[t], row[i])
			}
		}
		m := blockMax(mx)
		part := make([]float64, block)
		for t := range block {
			for i := t; i < cols; i += block {
				e := expf(row[i] - m)
				row[i] = e
				part[t] += float64(e)
			}
		}
		inv := float32(1 / blockSum(part))
		for i := range row {
			row[i] *= inv
		}
	}
}

func emuWriteKV(d emuDriver, grid [3]int, a args) {
	rowLen, kvLen := a.int(4), a.long(5)
	offs := view[int64](d, a.ptr(3), grid[0])
	for j := range grid[0] {
		k := f32s(d, a.ptr(1)+uint64(4*j*rowLen), rowLen)
		v := f32s(d, a.ptr(2)+uint64(4*j*rowLen), rowLen)
		copy(f32s(d, a.ptr(0)+uint64(4*offs[j]), rowLen), k)
		copy(f32s(d, a.ptr(0)+uint64(4*(offs[j]+kvLen)), rowLen), v)
	}
}

func tagOK(tags []uint64, page int32, w0, w1 uint64) bool {
	return w0|w1 != 0 && tags[2*page] == w0 && tags[2*page+1] == w1
}

func emuAttentionCheck(d emuDriver, grid [3]int, block int, a args) {
	n := a.int(3)
	pages := i32s(d, a.ptr(1), n)
	want := view[uint64](d, a.ptr(2), 2*n)
	flag, bad := i32s(d, a.ptr(4), 1), i32s(d, a.ptr(5), 1)
	for e := range min(n, grid[0]*block) {
		p := pages[e]
		tags := view[uint64](d, a.ptr(0), 2*int(p)+2)
		if !tagOK(tags, p, want[2*e], want[2*e+1]) {
			flag[0] = 1
			bad[0] = min(bad[0], int32(e))
		}
	}
}

func emuAttention(d emuDriver, grid [3]int, block int, a args) {
	const attWarps, attDims = 4, 8
	out, q, arena, pageTags, pagesP, wantP, rowinfoP, qrowP := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3), a.ptr(4), a.ptr(5), a.ptr(6), a.ptr(7)
	qCols, hd, group, pt := a.int(8), a.int(9), a.int(10), a.int(11)
	pageLen, kvLen, kvRow, layer := a.long(12), a.long(13), a.int(14), a.int(15)
	scale, check, flag := a.f32(16), a.int(17), i32s(d, a.ptr(18), 1)
	if block != 32*attWarps {
		panic("emu: paged_attention block")
	}
	rowinfo := i32s(d, rowinfoP, 2*grid[0])
	qrow := i32s(d, qrowP, grid[0])
	for r := range grid[0] {
		for h := range grid[1] {
			first, pos := int(rowinfo[2*r]), int(rowinfo[2*r+1])
			n := pos + 1
			npages := (n + pt - 1) / pt
			pages := i32s(d, pagesP+uint64(4*first), npages)
			bad := check != 0 && flag[0] != 0
			if check != 0 {
				want := view[uint64](d, wantP+uint64(16*first), 2*npages)
				for i, p := range pages {
					if !tagOK(view[uint64](d, pageTags, 2*int(p)+2), p, want[2*i], want[2*i+1]) {
						bad = true
						flag[0] = 1
					}
				}
			}
			if bad {
				continue
			}
			kh := h / group
			qh := f32s(d, q+uint64(4*(int(qrow[r])*qCols+h*hd)), hd)
			var sm, ss [attWarps]float32
			var sacc [attWarps][32 * attDims]float32
			for w := range attWarps {
				var m, s [32]float32
				var acc [32][attDims]float32
				for l := range m {
					m[l] = float32(math.Inf(-1))
				}
				for p := w; p < n; p += attWarps {
					base := int64(pages[p/pt])*pageLen + int64(2*layer)*kvLen + int64(p%pt)*int64(kvRow) + int64(kh*hd)
					key := f32s(d, arena+uint64(4*base), hd)
					val := f32s(d, arena+uint64(4*(base+kvLen)), hd)
					var dot [32]float32
					for l := range 32 {
						for j := range attDims {
							if dd := l + 32*j; dd < hd {
								dot[l] = fmaf(qh[dd], key[dd], dot[l])
							}
						}
					}
					sc := warpSum(dot) * scale
					for l := range 32 {
						mn := max(m[l], sc)
						corr := expf(m[l] - mn)
						e := expf(sc - mn)
						s[l] = s[l]*corr + e
						for j := range attDims {
							v := float32(0)
							if dd := l + 32*j; dd < hd {
								v = e * val[dd]
							}
							acc[l][j] = acc[l][j]*corr + v
						}
						m[l] = mn
					}
				}
				sm[w], ss[w] = m[0], s[0]
				for l := range 32 {
					for j := range attDims {
						sacc[w][l+32*j] = acc[l][j]
					}
				}
			}
			M := float32(math.Inf(-1))
			for w := range attWarps {
				M = max(M, sm[w])
			}
			var S float32
			var o [32 * attDims]float32
			for w := range attWarps {
				if math.IsInf(float64(sm[w]), -1) {
					continue
				}
				c := expf(sm[w] - M)
				S += ss[w] * c
				for i := range o {
					o[i] += sacc[w][i] * c
				}
			}
			inv := 1 / S
			oh := f32s(d, out+uint64(4*(int(qrow[r])*qCols+h*hd)), hd)
			for dd := range hd {
				oh[dd] = o[dd] * inv
			}
		}
	}
}

// TestEmulatedRefusesF16 shows NewArena refusing a KV type the device
// kernels do not read, before allocating anything.
func TestEmulatedRefusesF16(t *testing.T) {
	b, _ := newEmulated(t, kernels.Options{})
	_, err := b.NewArena(kernels.ArenaConfig{Pages: 2, PageTokens: 4, Layers: 1, KVHeads: 1, HeadDim: 8, KV: kernels.KVF16})
	if !errors.Is(err, kernels.ErrKVType) {
		t.Fatalf("NewArena with f16 KV: %v, want ErrKVType", err)
	}
}
