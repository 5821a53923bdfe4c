//go:build amd64

package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestQ8Tile4xn: avx2's Q8_0 prefill tile (4 activation rows × 3 weight
// rows a pass) gives every output the bits of q8i1x4 for any block count,
// weight row count, row and output strides, weight quants of any byte
// (−128 included) and activations at ±127; it does a multiple of 3 weight
// rows, says how many, and writes nothing else.
func TestQ8Tile4xn(t *testing.T) {
	k := kernelSet(AVX2)
	if k.path != AVX2 || k.q8tile4xn == nil {
		t.Skip("no avx2 path on this CPU")
	}
	r := rand.New(rand.NewPCG(19, 20))
	for _, nb := range []int{1, 2, 3, 24, 64} {
		for _, nw := range []int{1, 2, 3, 5, 6, 24} {
			for trial := range 4 {
				xpad, wpad, opad := 32*(trial%2), 6*(trial/2), trial
				cols, xqs, ws, os := nb*32, nb*32+xpad, nb*34+wpad, nw+opad
				xq, xd := make([]int8, 4*xqs), make([]float32, 4*(nb+1))
				for row := range 4 {
					x := make([]float32, cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
						if trial == 3 && i%3 == 0 {
							x[i] = 100 // quantized to ±127 in its block
						}
					}
					quantizeRowQ8(xq[row*xqs:row*xqs+cols], xd[row*(nb+1):row*(nb+1)+nb], x)
				}
				w := make([]byte, nw*ws)
				for i := range w {
					w[i] = byte(r.IntN(256))
					if trial == 2 && i%2 == 0 {
						w[i] = 0x80
					}
				}
				for row := range nw {
					for b := range nb {
						h := uint16(0x2c00 + r.IntN(0x2000))
						w[row*ws+b*34], w[row*ws+b*34+1] = byte(h), byte(h>>8)
					}
				}
				out := make([]float32, 4*os)
				for i := range out {
					out[i] = -7
				}
				n := k.q8tile4xn(xq, xqs, xd, nb+1, nb, w[:(nw-1)*ws+nb*34], ws, nw, out, os)
				if n != nw/3*3 {
					t.Fatalf("nb=%d nw=%d: did %d weight rows", nb, nw, n)
				}
				for i := range 4 {
					rq, rd := xq[i*xqs:i*xqs+cols], xd[i*(nb+1):i*(nb+1)+nb]
					for j := range os {
						got := out[i*os+j]
						if j >= n {
							if got != -7 {
								t.Fatalf("nb=%d nw=%d trial %d: wrote out[%d][%d]", nb, nw, trial, i, j)
							}
							continue
						}
						rw := w[j*ws : j*ws+nb*34]
						want, _, _, _ := k.q8i1x4(rq, rd, rw, rw, rw, rw)
						if !same(got, want) {
							t.Fatalf("nb=%d nw=%d trial %d: out[%d][%d] = %v, q8i1x4 %v", nb, nw, trial, i, j, got, want)
						}
					}
				}
			}
		}
	}
}

// TestQ8Float: a path in Q8_0's float order (kset.q8float: avx2) decodes a
// row with q8row to the values of the reference dequantization (d·q, any
// quant byte, −128 included) and its four-row product q8dot1x4 gives the
// bits of the path's float kernel (dot1x4) on the rows so dequantized.
func TestQ8Float(t *testing.T) {
	ran := false
	r := rand.New(rand.NewPCG(23, 24))
	for _, p := range Paths() {
		k := kernelSet(p)
		if !k.q8float {
			continue
		}
		ran = true
		for _, nb := range []int{1, 2, 3, 24, 64} {
			cols := nb * 32
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			var w [4][]byte
			var dec [4][]float32
			for j := range w {
				w[j] = make([]byte, nb*34)
				for i := range w[j] {
					w[j][i] = byte(r.IntN(256))
				}
				for b := range nb {
					h := uint16(0x2c00 + r.IntN(0x2000))
					w[j][b*34], w[j][b*34+1] = byte(h), byte(h>>8)
				}
				dec[j] = make([]float32, cols)
				k.q8row(dec[j], w[j])
				for b := range nb {
					d := f16tab[uint16(w[j][b*34])|uint16(w[j][b*34+1])<<8]
					for i := range 32 {
						if want := float32(int8(w[j][b*34+2+i])) * d; !same(dec[j][b*32+i], want) {
							t.Fatalf("%s nb=%d row %d value %d: %v, d·q %v", p, nb, j, b*32+i, dec[j][b*32+i], want)
						}
					}
				}
			}
			g0, g1, g2, g3 := k.q8dot1x4(x, w[0], w[1], w[2], w[3])
			f0, f1, f2, f3 := k.dot1x4(x, dec[0], dec[1], dec[2], dec[3])
			for j, g := range []float32{g0, g1, g2, g3} {
				if f := []float32{f0, f1, f2, f3}[j]; !same(g, f) {
					t.Fatalf("%s nb=%d row %d: %v, float kernel on the dequantized row %v", p, nb, j, g, f)
				}
			}
		}
	}
	if !ran && hasAVX2 {
		t.Fatal("no path in Q8_0's float order on an AVX2 CPU")
	}
}
