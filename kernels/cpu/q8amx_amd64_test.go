package cpu

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cloison/cloison/kernels"
)

// needAMX skips where the CPU (or the OS) has no AMX, and says so where it
// does: the tests below then run the AMX kernel.
func needAMX(t testing.TB) {
	t.Helper()
	if !hasAMX {
		t.Skip("no AMX-INT8 on this CPU (or the OS refused the tile state): the amx path is not tested")
	}
	if !slices.Contains(Paths(), AMX) {
		t.Fatal("AMX present but the amx path is not offered")
	}
	t.Log("AMX present: testing the amx kernel")
}

// fma32 is float32's fused multiply-add, exactly rounded once (big.Float:
// float64's FMA rounded again to float32 could round twice).
func fma32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(512).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// q8amxRef is the amx path's order for one output, in Go: the exact block
// sums, scaled by round32(d_w·d_x), fused-multiply-added in block order
// from +0.
func q8amxRef(xq []int8, xd []float32, w []byte) float32 {
	var acc float32
	for b := range xd {
		var sum int32
		for i := range 32 {
			sum += int32(int8(w[b*34+2+i])) * int32(xq[b*32+i])
		}
		acc = fma32(float32(sum), q8Scale((*q8Block)(w[b*34:]))*xd[b], acc)
	}
	return acc
}

// q8quadRef is the quad order (q8blk_amd64.go) for one output, in Go.
func q8quadRef(xq []int8, xd []float32, w []byte) float32 {
	var a [4]float32
	for b := range xd {
		var sum int32
		for i := range 32 {
			sum += int32(int8(w[b*34+2+i])) * int32(xq[b*32+i])
		}
		a[b%4] = fma32(float32(sum), q8Scale((*q8Block)(w[b*34:]))*xd[b], a[b%4])
	}
	return (a[0] + a[1]) + (a[2] + a[3])
}

// q8groupKernels are the Q8_0 kernels that take activation rows in
// groups of 16 (q8acts.t): AMX's tile in the amx order, and the avx512
// path's VNNI tile in the quad order, each with its path's decode kernel
// and its order in Go, where the CPU runs it.
var q8groupKernels = []struct {
	name string
	has  bool
	path Path
	tile func(w []byte, stride, m, nb int, xt []int8, xd []float32, xc []int32, ng int, dst []float32, ld, lo, hi int, s *amxScratch)
	rows func(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32)
	ref  func(xq []int8, xd []float32, w []byte) float32
}{
	{"amx", hasAMX, AMX, vq8amx, vq8rowsBlk, q8amxRef},
	{"quad", hasVNNI, AVX512, vq8quad, vq8quadRows, q8quadRef},
}

// TestQ8AMX: the group tiles (AMX's in the amx order, avx512's VNNI tile
// in the quad order) and their decode kernels (q8rowsBlk, q8quadRows) give
// every output the bits of their order in Go, for 1–16 weight rows (1–16
// rows a decode call), 1–4 groups of activation rows, 1–48 blocks (every
// count mod 4 and mod 8), padded weight rows, any quant byte (−128
// included) and activations at ±127, writing only the rows asked for.
func TestQ8AMX(t *testing.T) {
	ran := false
	for _, kern := range q8groupKernels {
		if kern.has {
			ran = true
			t.Run(kern.name, func(t *testing.T) { testQ8AMX(t, kern.tile, kern.rows, kern.ref) })
		}
	}
	if !ran {
		t.Skip("no AVX512_VNNI nor AMX on this CPU: the group tiles are not tested")
	}
}

func testQ8AMX(t *testing.T, tile func(w []byte, stride, m, nb int, xt []int8, xd []float32, xc []int32, ng int, dst []float32, ld, lo, hi int, s *amxScratch),
	rowsKernel func(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32), ref func(xq []int8, xd []float32, w []byte) float32) {
	r := rand.New(rand.NewPCG(35, 36))
	for _, nb := range []int{1, 2, 3, 5, 6, 7, 21, 48} {
		for _, m := range []int{1, 5, 8, 13, 16} {
			for _, ng := range []int{1, 2, 4} {
				for trial := range 3 {
					stride, cols, rows := nb*34+3*(trial%2), nb*32, ng*16
					xq, xd := make([]int8, rows*cols), make([]float32, rows*nb)
					xt, xtd, xtc := make([]int8, rows*cols), make([]float32, rows*nb), make([]int32, rows*nb)
					for row := range rows {
						x := make([]float32, cols)
						for i := range x {
							x[i] = float32(r.NormFloat64())
							if trial == 2 && i%3 == 0 {
								x[i] = 100 // ±127 in its block
							}
						}
						q, d := xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb]
						quantizeRowQ8(q, d, x)
						q8Transpose(xt[row&^15*cols:], xtd[row&^15*nb:], row&15, q, d)
						q8BlockCorr(xtc[row&^15*nb:], row&15, q)
					}
					w := make([]byte, m*stride)
					for i := range w {
						w[i] = byte(r.IntN(256))
						if trial == 1 && i%7 == 0 {
							w[i] = 0x80
						}
					}
					for j := range m {
						for b := range nb {
							h := uint16(0x2c00 + r.IntN(0x2000))
							w[j*stride+b*34], w[j*stride+b*34+1] = byte(h), byte(h>>8)
						}
					}
					s := amxPool.Get().(*amxScratch)
					// Rows lo…hi of a dst with ld > m: the rest untouched.
					ld, lo, hi := m+3, trial%3, rows-trial%2
					dst := make([]float32, rows*ld)
					const sentinel = 12345
					for i := range dst {
						dst[i] = sentinel
					}
					tile(w, stride, m, nb, xt, xtd, xtc, ng, dst, ld, lo, hi, s)
					for row := range rows {
						for j := range ld {
							got := dst[row*ld+j]
							if row < lo || row >= hi || j >= m {
								if got != sentinel {
									t.Fatalf("nb=%d m=%d ng=%d trial %d: wrote dst[%d][%d] outside rows %d…%d, columns < %d", nb, m, ng, trial, row, j, lo, hi, m)
								}
								continue
							}
							want := ref(xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb], w[j*stride:j*stride+nb*34])
							if !same(got, want) {
								t.Fatalf("nb=%d m=%d ng=%d trial %d: out[%d][%d] = %v, want %v", nb, m, ng, trial, row, j, got, want)
							}
						}
					}
					amxPool.Put(s)
					// The decode kernel, one activation row at a time.
					xc, got := make([]int32, cols/4), make([]float32, m)
					for _, row := range []int{0, rows - 1} {
						q, d := xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb]
						q8Corr(xc, q)
						rowsKernel(q, xc, d, w, stride, got)
						for j := range m {
							if want := ref(q, d, w[j*stride:j*stride+nb*34]); !same(got[j], want) {
								t.Fatalf("decode nb=%d m=%d trial %d: out[%d][%d] = %v, want %v", nb, m, trial, row, j, got[j], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestQ8AMXProduct: every Q8_0 product on the amx path and on avx512's
// with VNNI (the quad order), one row (decode) or a batch that fills
// 16-row groups or leaves a partial one (17, 70: across an activation
// task), with weight counts that leave tails after 16-row calls, rows too
// long for the tile (the row kernel), on 1 and 2 threads, has in each
// element the bits of the path's order on the row's quantized activations.
func TestQ8AMXProduct(t *testing.T) {
	ran := false
	for _, kern := range q8groupKernels {
		if kern.has {
			ran = true
			t.Run(kern.name, func(t *testing.T) { testQ8AMXProduct(t, kern.path, kern.ref) })
		}
	}
	if !ran {
		t.Skip("no AVX512_VNNI nor AMX on this CPU: the group tiles are not tested")
	}
}

func testQ8AMXProduct(t *testing.T, path Path, ref func(xq []int8, xd []float32, w []byte) float32) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, sh := range []struct{ rows, cols, n int }{{1, 256, 24}, {3, 64, 30}, {5, 96, 7}, {16, 256, 53}, {17, 768, 40}, {70, 512, 100}, {17, 32 * (q8amxMaxBlocks + 1), 5}} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%dx%dx%d/threads=%d", sh.rows, sh.cols, sh.n, threads), func(t *testing.T) {
				w := make([]float32, sh.n*sh.cols)
				for i := range w {
					w[i] = float32(r.NormFloat64())
				}
				data, err := kernels.Quantize(kernels.Q8_0, w)
				if err != nil {
					t.Fatal(err)
				}
				xs := make([]float32, sh.rows*sh.cols)
				for i := range xs {
					xs[i] = float32(r.NormFloat64()) * float32(1+i%7)
				}
				got := productOnPath(t, path, threads, kernels.Q8_0, sh.rows, sh.cols, sh.n, data, xs)
				nb, rb := sh.cols/32, sh.cols/32*34
				xq, xd := make([]int8, sh.cols), make([]float32, nb)
				for row := range sh.rows {
					quantizeRowQ8(xq, xd, xs[row*sh.cols:(row+1)*sh.cols])
					for o := range sh.n {
						if want := ref(xq, xd, data[o*rb:(o+1)*rb]); !same(got[row*sh.n+o], want) {
							t.Fatalf("row %d out %d: %v, want %v", row, o, got[row*sh.n+o], want)
						}
					}
				}
			})
		}
	}
}

// BenchmarkQ8AMXTile: 64 activation rows × 16 weight rows of nb blocks, the
// group tiles (AMX's, avx512's VNNI tile in the quad order; 4 groups of 16
// rows a call, the quad tile's packing included, as a task does), per CPU
// second (cpu-GOP/s: 2 ops a multiply-add).
func BenchmarkQ8AMXTile(b *testing.B) {
	if !hasVNNI {
		b.Skip("no AVX512_VNNI")
	}
	const nb, rows, m = 48, 64, 16
	cols, stride := nb*32, nb*34
	r := rand.New(rand.NewPCG(1, 2))
	xq, xd := make([]int8, rows*cols), make([]float32, rows*nb)
	xt, xtd, xtc := make([]int8, rows*cols), make([]float32, rows*nb), make([]int32, rows*nb)
	for row := range rows {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		q, d := xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb]
		quantizeRowQ8(q, d, x)
		q8Transpose(xt[row&^15*cols:], xtd[row&^15*nb:], row&15, q, d)
		q8BlockCorr(xtc[row&^15*nb:], row&15, q)
	}
	w := make([]byte, m*stride)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for j := range m {
		for blk := range nb {
			w[j*stride+blk*34], w[j*stride+blk*34+1] = 0, 0x3c
		}
	}
	report := func(b *testing.B, c0 time.Duration) {
		ops := 2 * float64(rows*m*cols) * float64(b.N)
		b.ReportMetric(ops/(cpuTime()-c0).Seconds()/1e9, "cpu-GOP/s")
	}
	for _, kern := range q8groupKernels {
		b.Run(kern.name, func(b *testing.B) {
			if !kern.has {
				b.Skip("not on this CPU")
			}
			s := amxPool.Get().(*amxScratch)
			dst := make([]float32, rows*m)
			c0 := cpuTime()
			for b.Loop() {
				kern.tile(w, stride, m, nb, xt, xtd, xtc, 4, dst, m, 0, rows, s)
			}
			report(b, c0)
		})
	}
}
