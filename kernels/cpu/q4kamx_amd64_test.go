package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cloison/cloison/kernels"
)

// q4kamxRef is the amx path's Q4_K order for one output, in Go: per
// super-block the exact isum = Σ sc·q·x and msum = Σ m·Σx, then
// acc = fma(float32(isum), round32(d·d_x), acc) and
// acc = fma(−float32(msum), round32(dmin·d_x), acc), super-blocks in order
// from +0.
func q4kamxRef(xq []int8, xd []float32, w []byte) float32 {
	var acc float32
	for b := range xd {
		blk := w[b*144 : b*144+144]
		d := kernels.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		dmin := kernels.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
		x := xq[b*256 : b*256+256]
		var isum, msum int32
		for j := range 8 {
			sc, m := kernels.Q4KScaleMin(j, blk[4:16])
			var s, sx int32
			for i := range 32 {
				qb := blk[16+32*(j/2)+i]
				q := int32(qb & 15)
				if j%2 == 1 {
					q = int32(qb >> 4)
				}
				v := int32(x[32*j+i])
				s += q * v
				sx += v
			}
			isum += int32(sc) * s
			msum += int32(m) * sx
		}
		acc = fma32(float32(isum), d*xd[b], acc)
		acc = fma32(-float32(msum), dmin*xd[b], acc)
	}
	return acc
}

// q4kamxActs quantizes rows × cols activations to Q8_K and lays them out
// as prepareQ8 does for the amx path (kt, kd, kb; rows padded to 16).
func q4kamxActs(x []float32, rows, cols int) (q []int8, d []float32, bs []int16, kt []int8, kd []float32, kb []int32) {
	nsb, rp := cols/256, (rows+15)&^15
	q, d, bs = make([]int8, rows*cols), make([]float32, rows*nsb), make([]int16, rows*cols/16)
	kt, kd, kb = make([]int8, rp*cols), make([]float32, rp*nsb), make([]int32, rp*cols/64)
	for r := range rows {
		rq, rd, rb := q[r*cols:(r+1)*cols], d[r*nsb:(r+1)*nsb], bs[r*cols/16:(r+1)*cols/16]
		quantizeRowQ8K(rq, rd, rb, x[r*cols:(r+1)*cols])
		q8Transpose(kt[r&^15*cols:], kd[r&^15*nsb:], r&15, rq, rd)
		q4kPairs(kb[r&^15*cols/64:], r&15, rb)
	}
	return
}

// randQ4K returns n Q4_K super-blocks of random bytes (every scale, minimum
// and nibble pattern) with finite d and dmin in [2⁻⁸, 2⁰), or, with
// quantized set, rows of quantized normal weights.
func randQ4K(r *rand.Rand, rows, nsb int, quantized bool) []byte {
	if quantized {
		wf := make([]float32, rows*nsb*256)
		for i := range wf {
			wf[i] = float32(r.NormFloat64())
		}
		w, err := kernels.Quantize(kernels.Q4_K, wf)
		if err != nil {
			panic(err)
		}
		return w
	}
	w := make([]byte, rows*nsb*144)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for b := 0; b < len(w); b += 144 {
		for _, off := range []int{0, 2} {
			h := uint16(0x1c00 + r.IntN(0x2000))
			w[b+off], w[b+off+1] = byte(h), byte(h>>8)
		}
	}
	return w
}

// q4kTiles are the kernels of the amx order's Q4_K tile: on AMX tiles (the
// amx path) and on AVX512_VNNI (the avx512 path), each with whether this
// CPU runs it.
var q4kTiles = []struct {
	name string
	have bool
	pack func(w []byte, m, nsb int, s *q4kamxScratchT)
	tile func(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT)
	rows func(xq []int8, xd []float32, bs []int16, w []byte, out []float32) // the decode kernel
}{
	{"amx", hasAMX, vq4kamxPack, vq4kamx, vq4krowsBlk},
	{"vnni", hasVNNI, vq4kvnniPack, vq4kvnni, vq4krowsBlk},
	{"avx2", hasAVX2, vq4kvnniPack, vq4kblk, vq4kblkRows},
}

// TestQ4KAMX: the Q4_K tiles of the amx order (AMX, VNNI and AVX2) and
// their decode kernels (q4krowsBlk, q4krowsPairBlk with VBMI, q4krows4Blk, q4krows4X on the interleaved layout, q4kblkAVX2) give every output the bits of the amx order
// (q4kamxRef), for 1–16 weight rows, 1–4 groups of activation rows,
// random and quantized weights (any scale, minimum and nibble),
// activations at ±127 and a block of zeros, writing only the rows asked
// for.
func TestQ4KAMX(t *testing.T) {
	for _, k := range q4kTiles {
		t.Run(k.name, func(t *testing.T) {
			if k.name == "amx" {
				needAMX(t)
			} else if !k.have {
				t.Skipf("this CPU lacks the %s tile's instructions", k.name)
			}
			if k.name != "vnni" {
				testQ4KTile(t, k.pack, k.tile, k.rows)
				return
			}
			// Every decode kernel the CPU can run: four rows at a time
			// (Zen 4's), the super-block pairs (VBMI) and one super-block.
			four, vbmi := q4kFour, hasVBMI
			defer func() { q4kFour, hasVBMI = four, vbmi }()
			for _, f := range []bool{true, false} {
				for _, v := range []bool{true, false} {
					if v && !vbmi {
						continue
					}
					q4kFour, hasVBMI = f, v
					testQ4KTile(t, k.pack, k.tile, k.rows)
				}
			}
		})
	}
}

func testQ4KTile(t *testing.T, pack func(w []byte, m, nsb int, s *q4kamxScratchT), tile func(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT), decode func(xq []int8, xd []float32, bs []int16, w []byte, out []float32)) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, nsb := range []int{1, 2, 3, 5} {
		for _, m := range []int{1, 5, 16} {
			for _, ng := range []int{1, 2, 4} {
				for trial := range 3 {
					cols, rows := nsb*256, ng*16
					x := make([]float32, rows*cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
						if trial == 2 && i%5 == 0 {
							x[i] = -100 // −127 in its block
						}
					}
					if nsb == 3 {
						clear(x[256:512])
					}
					xq, xd, bs, kt, kd, kb := q4kamxActs(x, rows, cols)
					w := randQ4K(r, m, nsb, trial == 1)
					s := q4kamxPool.Get().(*q4kamxScratchT)
					pack(w, m, nsb, s)
					ld, lo, hi := m+3, trial%3, rows-trial%2
					dst := make([]float32, rows*ld)
					const sentinel = 12345
					for i := range dst {
						dst[i] = sentinel
					}
					tile(kt, kd, kb, ng, dst, ld, lo, hi, s)
					q4kamxPool.Put(s)
					for row := range rows {
						for j := range ld {
							got := dst[row*ld+j]
							if row < lo || row >= hi || j >= m {
								if got != sentinel {
									t.Fatalf("nsb=%d m=%d ng=%d trial %d: wrote dst[%d][%d] outside rows %d…%d, columns < %d", nsb, m, ng, trial, row, j, lo, hi, m)
								}
								continue
							}
							want := q4kamxRef(xq[row*cols:(row+1)*cols], xd[row*nsb:(row+1)*nsb], w[j*nsb*144:(j+1)*nsb*144])
							if !same(got, want) {
								t.Fatalf("nsb=%d m=%d ng=%d trial %d: out[%d][%d] = %v, want %v", nsb, m, ng, trial, row, j, got, want)
							}
						}
					}
					got := make([]float32, m)
					for _, row := range []int{0, rows - 1} {
						q, d, b := xq[row*cols:(row+1)*cols], xd[row*nsb:(row+1)*nsb], bs[row*cols/16:(row+1)*cols/16]
						decode(q, d, b, w, got)
						for j := range m {
							if want := q4kamxRef(q, d, w[j*nsb*144:(j+1)*nsb*144]); !same(got[j], want) {
								t.Fatalf("q4krows nsb=%d m=%d trial %d: out[%d][%d] = %v, want %v", nsb, m, trial, row, j, got[j], want)
							}
						}
						if hasVNNI && m >= 4 {
							// The interleaved layout's kernel (q4kx.go).
							gx := make([]float32, m&^3)
							vq4krowsX(q, d, b, q4kInterleave(w, m, nsb), gx)
							for j := range gx {
								if want := q4kamxRef(q, d, w[j*nsb*144:(j+1)*nsb*144]); !same(gx[j], want) {
									t.Fatalf("q4krowsX nsb=%d m=%d trial %d: out[%d][%d] = %v, want %v", nsb, m, trial, row, j, gx[j], want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestQ4KAMXProduct: every Q4_K product on the amx path, the avx512
// path with VNNI and the avx2 path, one row (decode),
// 3 (the row kernel), 4, 16, 17 and 70 rows (padded groups, across an
// activation task), weight counts that leave tails after 16-row calls,
// rows too long for the tile (the row kernel), on 1 and 2 threads, has in
// each element the bits of the amx order on the row's quantized
// activations.
func TestQ4KAMXProduct(t *testing.T) {
	for _, p := range []Path{AMX, AVX512, AVX2} {
		t.Run(string(p), func(t *testing.T) {
			switch {
			case p == AMX:
				needAMX(t)
			case p == AVX512 && !hasAVX512:
				t.Skip("no AVX-512 on this CPU")
			case p == AVX2 && !hasAVX2:
				t.Skip("no AVX2 on this CPU")
			}
			testQ4KProduct(t, p)
		})
	}
}

func testQ4KProduct(t *testing.T, path Path) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, sh := range []struct{ rows, cols, n int }{{1, 256, 24}, {3, 512, 30}, {4, 256, 7}, {16, 768, 53}, {17, 768, 40}, {70, 512, 100}, {17, 256 * (q4kamxMaxBlocks + 1), 3}} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%dx%dx%d/threads=%d", sh.rows, sh.cols, sh.n, threads), func(t *testing.T) {
				nsb := sh.cols / 256
				data := randQ4K(r, sh.n, nsb, true)
				xs := make([]float32, sh.rows*sh.cols)
				for i := range xs {
					xs[i] = float32(r.NormFloat64()) * float32(1+i%7)
				}
				got := productOnPath(t, path, threads, kernels.Q4_K, sh.rows, sh.cols, sh.n, data, xs)
				rb := nsb * 144
				xq, xd, bs := make([]int8, sh.cols), make([]float32, nsb), make([]int16, sh.cols/16)
				for row := range sh.rows {
					quantizeRowQ8K(xq, xd, bs, xs[row*sh.cols:(row+1)*sh.cols])
					for o := range sh.n {
						if want := q4kamxRef(xq, xd, data[o*rb:(o+1)*rb]); !same(got[row*sh.n+o], want) {
							t.Fatalf("row %d out %d: %v, want %v", row, o, got[row*sh.n+o], want)
						}
					}
				}
			})
		}
	}
}

// BenchmarkQ4KAMXTile: 64 activation rows × 16 Q4_K weight rows of nsb
// super-blocks, the amx order's tiles (AMX, VNNI, AVX2; packing included,
// 4 groups of 16 rows a call), per CPU second (cpu-GOP/s: 2 ops a
// multiply-add).
func BenchmarkQ4KAMXTile(b *testing.B) {
	const nsb, rows, m = 12, 64, 16
	cols := nsb * 256
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	_, _, _, kt, kd, kb := q4kamxActs(x, rows, cols)
	w := randQ4K(r, m, nsb, true)
	report := func(b *testing.B, c0 time.Duration) {
		ops := 2 * float64(rows*m*cols) * float64(b.N)
		b.ReportMetric(ops/(cpuTime()-c0).Seconds()/1e9, "cpu-GOP/s")
	}
	for _, k := range q4kTiles {
		b.Run(k.name, func(b *testing.B) {
			if !k.have {
				b.Skip("not on this CPU")
			}
			s := q4kamxPool.Get().(*q4kamxScratchT)
			dst := make([]float32, rows*m)
			c0 := cpuTime()
			for b.Loop() {
				k.pack(w, m, nsb, s)
				k.tile(kt, kd, kb, 4, dst, m, 0, rows, s)
			}
			report(b, c0)
		})
	}
}
