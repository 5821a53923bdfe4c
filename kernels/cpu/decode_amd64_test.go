package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestToHalfVec: the avx2 conversion of f16 KV writes gives
// kernels.F32ToF16's halves bit for bit: every tie between two adjacent
// halves and the floats one ulp either side (subnormals, overflow to
// infinity included), NaNs with payloads, random bit patterns; a row whose
// length is not a multiple of 8 gets its tail, and nothing past it is
// written.
func TestToHalfVec(t *testing.T) {
	if toHalfVec == nil {
		t.Skip("no avx2 on this CPU")
	}
	var src []float32
	for h := range uint32(0x7c00) {
		lo := float64(kernels.F16ToF32(uint16(h)))
		hi := float64(kernels.F16ToF32(uint16(h + 1)))
		mid := float32((lo + hi) / 2) // exact: halves have 11 significant bits
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1)))} {
			src = append(src, f, -f)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 1 << 16 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	for _, b := range []uint32{0x7f800001, 0x7fc00000, 0x7fffffff, 0xffc00001, 0x7fa00000, 0x7f800000, 0xff800000, 0x80000000, 0x477ff000, 0x477fe000} {
		src = append(src, math.Float32frombits(b))
	}
	src = append(src, 1, 2, 3) // a tail
	dst := make([]uint16, len(src)+5)
	for i := range dst {
		dst[i] = 0xbeef
	}
	toHalfVec(dst[:len(src)], src)
	for i, f := range src {
		if want := kernels.F32ToF16(f); dst[i] != want {
			t.Fatalf("element %d: %#08x → %#04x, F32ToF16 %#04x", i, math.Float32bits(f), dst[i], want)
		}
	}
	for i := len(src); i < len(dst); i++ {
		if dst[i] != 0xbeef {
			t.Fatalf("element %d past the row written: %#04x", i, dst[i])
		}
	}
}
