//go:build goexperiment.simd && amd64

package cpu

import (
	"math"
	"testing"
)

// TestF16x8 checks the vector half decoder against the table on every half.
func TestF16x8(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA")
	}
	var in [8]uint16
	var out [8]float32
	for h := 0; h < 1<<16; h += 8 {
		for i := range in {
			in[i] = uint16(h + i)
		}
		f16x8(&in).Store(&out)
		for i, v := range out {
			if math.Float32bits(v) != math.Float32bits(f16tab[h+i]) {
				t.Fatalf("half %#04x: got %#08x, want %#08x", h+i, math.Float32bits(v), math.Float32bits(f16tab[h+i]))
			}
		}
	}
}
