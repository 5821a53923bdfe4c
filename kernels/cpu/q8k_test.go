package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// quantizeRowQ8KRef is quantizeRowQ8K as first written (Go's float max
// over the block, then a pass for the 16-value sums): the oracle of
// TestQuantizeRowQ8K.
func quantizeRowQ8KRef(q []int8, d []float32, bs []int16, x []float32) {
	for b := range d {
		xb := x[b*256 : b*256+256]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = dd
		qb := q[b*256 : b*256+256]
		for j, v := range xb {
			const magic = 12582912
			r := float32(float32(v*id)+magic) - magic
			qb[j] = int8(max(-127, min(127, int32(r))))
		}
		for g := range 16 {
			var s int16
			for _, v := range qb[g*16 : g*16+16] {
				s += int16(v)
			}
			bs[b*16+g] = s
		}
	}
}

// quantizeRowQ8Ref is quantizeRowQ8 as first written (Go's float max).
func quantizeRowQ8Ref(q []int8, d []float32, x []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = dd
		qb := q[b*32 : b*32+32]
		for j, v := range xb {
			const magic = 12582912
			r := float32(float32(v*id)+magic) - magic
			qb[j] = int8(max(-127, min(127, int32(r))))
		}
	}
}

// TestQuantizeRowQ8K: the integer-max quantizers (Q8_K and Q8) give the reference's bits
// (scales, quants, sums) on random rows, rows with zeros, signed zeros,
// infinities, subnormals and NaNs in one block of several.
func TestQuantizeRowQ8K(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-45, -1e-45, math.MaxFloat32, -math.MaxFloat32, 127, -127.5}
	for it := range 2000 {
		n := 256 * (1 + it%4)
		x := make([]float32, n)
		for i := range x {
			switch it % 5 {
			case 0:
				x[i] = float32(r.NormFloat64())
			case 1:
				x[i] = math.Float32frombits(r.Uint32())
			case 2:
				x[i] = float32(r.IntN(255) - 127)
			default:
				x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30)))
			}
		}
		if it%3 == 0 {
			for range 1 + r.IntN(4) {
				x[r.IntN(n)] = specials[r.IntN(len(specials))]
			}
		}
		if it%7 == 0 {
			clear(x[:256])
		}
		q, d, bs := make([]int8, n), make([]float32, n/256), make([]int16, n/16)
		wq, wd, wbs := make([]int8, n), make([]float32, n/256), make([]int16, n/16)
		quantizeRowQ8K(q, d, bs, x)
		quantizeRowQ8KRef(wq, wd, wbs, x)
		for i := range d {
			if math.Float32bits(d[i]) != math.Float32bits(wd[i]) {
				t.Fatalf("it %d block %d: scale %v (%#x), want %v (%#x)", it, i, d[i], math.Float32bits(d[i]), wd[i], math.Float32bits(wd[i]))
			}
		}
		if !slices.Equal(q, wq) || !slices.Equal(bs, wbs) {
			t.Fatalf("it %d: quants or sums differ from the reference", it)
		}
		// Q8 blocks of 32 (quantizeRowQ8), on the same rows.
		q8, d8 := make([]int8, n), make([]float32, n/32)
		w8, wd8 := make([]int8, n), make([]float32, n/32)
		quantizeRowQ8(q8, d8, x)
		quantizeRowQ8Ref(w8, wd8, x)
		for i := range d8 {
			if math.Float32bits(d8[i]) != math.Float32bits(wd8[i]) {
				t.Fatalf("it %d Q8 block %d: scale %v, want %v", it, i, d8[i], wd8[i])
			}
		}
		if !slices.Equal(q8, w8) {
			t.Fatalf("it %d: Q8 quants differ from the reference", it)
		}
	}
}

func BenchmarkQuantizeRowQ8K(b *testing.B) {
	const n = 2048
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((i*7)%13-6) * 0.37
	}
	q, d, bs := make([]int8, n), make([]float32, n/256), make([]int16, n/16)
	for _, f := range []struct {
		name string
		fn   func([]int8, []float32, []int16, []float32)
	}{{"intmax", quantizeRowQ8K}, {"ref", quantizeRowQ8KRef}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				f.fn(q, d, bs, x)
			}
		})
	}
}
