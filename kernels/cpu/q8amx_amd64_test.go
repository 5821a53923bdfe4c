package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cloison/cloison/kernels"
)

// needAMX skips where the CPU (or the OS) has no AMX, and says so where it
// does: the tests below then run the AMX kernel.
func needAMX(t *testing.T) {
	t.Helper()
	if !hasAMX {
		t.Skip("no AMX-INT8 on this CPU (or the OS refused the tile state): the amx path is not tested")
	}
	if !slices.Contains(Paths(), AMX) {
		t.Fatal("AMX present but the amx path is not offered")
	}
	t.Log("AMX present: testing the amx kernel")
}

// TestQ8AMX: the AMX Q8_0 tile gives every output the bits of the one-row
// VNNI kernel (q8rows) and of the avx2 kernel (VPMADDUBSW, the same block
// integers), for 1–16 weight rows, 1–4 groups of activation rows, block
// counts on both sides of the kernel's 4-block chunks, padded weight rows,
// any quant byte (−128 included) and activations at ±127.
func TestQ8AMX(t *testing.T) {
	needAMX(t)
	k, a2 := kernelSet(AMX), kernelSet(AVX2)
	r := rand.New(rand.NewPCG(35, 36))
	for _, nb := range []int{1, 3, 4, 5, 8, 9, 48} {
		for _, m := range []int{1, 5, 8, 16} {
			for _, ng := range []int{1, 2, 4} {
				for trial := range 3 {
					stride, cols := nb*34+2*(trial%2), nb*32
					rows := ng * 16
					xq, xd, xc := make([]int8, rows*cols), make([]float32, rows*nb), make([]int32, rows*cols/4)
					xt, xtd := make([]int8, rows*cols), make([]float32, rows*nb)
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
						q8Corr(xc[row*cols/4:(row+1)*cols/4], q)
						q8Transpose(xt[row&^15*cols:], xtd[row&^15*nb:], row&15, q, d)
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
					k.q8amx(w, stride, m, nb, xt, xtd, ng, s)
					for row := range rows {
						rq, rc, rd := xq[row*cols:(row+1)*cols], xc[row*cols/4:(row+1)*cols/4], xd[row*nb:(row+1)*nb]
						want := make([]float32, m)
						k.q8rows(rq, rc, rd, w, stride, want)
						for j := range m {
							rw := w[j*stride : j*stride+nb*34]
							avx2, _, _, _ := a2.q8i1x4(rq, rd, rw, rw, rw, rw)
							got := s.out[(row/16)*256+j*16+row%16]
							if !same(got, want[j]) || !same(got, avx2) {
								t.Fatalf("nb=%d m=%d ng=%d trial %d: out[%d][%d] = %v, q8rows %v, avx2 %v", nb, m, ng, trial, row, j, got, want[j], avx2)
							}
						}
					}
					amxPool.Put(s)
				}
			}
		}
	}
}

// TestQ8AMXPaths: a Q8_0 product on the amx path has the bits of the same
// product on the avx512 path, element by element, for batches that fill
// 16-row groups or leave a partial one (17, 33, 70 rows, crossing an
// activation task), weight counts that leave tails after 16- and 8-row
// calls, and 1 or 2 threads.
func TestQ8AMXPaths(t *testing.T) {
	needAMX(t)
	r := rand.New(rand.NewPCG(37, 38))
	for _, sh := range []struct{ rows, cols, n int }{{16, 256, 24}, {17, 768, 53}, {33, 32, 7}, {70, 512, 100}, {128, 1536, 48}} {
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
				var outs [2][]float32
				for i, p := range []Path{AVX512, AMX} {
					b, err := NewWithPath(kernels.Options{Threads: threads}, p)
					if err != nil {
						t.Fatal(err)
					}
					m, err := b.NewMatrix(kernels.Q8_0, sh.n, sh.cols, data)
					if err != nil {
						t.Fatal(err)
					}
					x, _ := b.NewTensor(sh.rows, sh.cols)
					b.Upload(x, xs)
					dst, _ := b.NewTensor(sh.rows, sh.n)
					if err := b.MatMul(dst, x, m); err != nil {
						t.Fatal(err)
					}
					outs[i] = slices.Clone(Data(dst))
					b.Close()
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("row %d out %d: avx512 %v, amx %v", i/sh.n, i%sh.n, outs[0][i], outs[1][i])
					}
				}
			})
		}
	}
}

// BenchmarkQ8AMXTile: 64 activation rows × 16 weight rows of nb blocks, the
// AMX tile (4 groups of 16 rows a call) against the 4×8 VNNI tile (packing
// included, as a task does), reported per CPU second (cpu-GOP/s: 2 ops a
// multiply-add).
func BenchmarkQ8AMXTile(b *testing.B) {
	if !hasAMX {
		b.Skip("no AMX")
	}
	const nb, rows, m = 48, 64, 16
	cols, stride := nb*32, nb*34
	r := rand.New(rand.NewPCG(1, 2))
	xq, xd := make([]int8, rows*cols), make([]float32, rows*nb)
	xt, xtd, xu := make([]int8, rows*cols), make([]float32, rows*nb), make([]byte, 2*rows*cols)
	for row := range rows {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		q, d := xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb]
		quantizeRowQ8(q, d, x)
		q8Transpose(xt[row&^15*cols:], xtd[row&^15*nb:], row&15, q, d)
		vq8dup(q, xu[2*row*cols:2*(row+1)*cols])
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
	b.Run("amx", func(b *testing.B) {
		s := amxPool.Get().(*amxScratch)
		c0 := cpuTime()
		for b.Loop() {
			vq8amx(w, stride, m, nb, xt, xtd, 4, s)
		}
		report(b, c0)
	})
	b.Run("vnni4x8", func(b *testing.B) {
		var ps packScratch
		pk := ps.aligned(nb * q8packBytes)
		var out [32]float32
		c0 := cpuTime()
		for b.Loop() {
			for o := 0; o < m; o += 8 {
				vq8pack8(w[o*stride:], stride, nb, pk)
				for row := 0; row < rows; row += 4 {
					vq8tile4x8(xu[2*row*cols:2*(row+4)*cols], xd[row*nb:(row+4)*nb], pk, &out)
				}
			}
		}
		report(b, c0)
	})
}
