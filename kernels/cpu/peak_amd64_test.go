package cpu

import (
	"testing"
)

// BenchmarkPeak measures one core's arithmetic peaks, the bounds the
// prefill and batch figures are held against (doc.go): float32
// multiply-adds (fma: GFLOP/s, twelve independent VFMADD231PS chains; fma+cvt:
// the same with the 3×4 F16 tile's four VCVTPH2PS to twelve multiply-adds)
// and the int8 dot product without VNNI (int8: G multiply-adds/s,
// VPMADDUBSW, VPMADDWD and VPADDD per 32 byte products, the least work of a
// Q8_0 or k-quant block on AVX2).
func BenchmarkPeak(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	const n = 1 << 16
	for _, c := range []struct {
		name, unit string
		run        func(int)
	}{
		{"fma", "GFLOP/s", peakFMAAVX2},
		{"int8", "GMAC/s", peakI8AVX2},
		{"fma+cvt", "GFLOP/s", peakFMACvtAVX2},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run(n)
			}
			b.ReportMetric(192*n*float64(b.N)/b.Elapsed().Seconds()/1e9, c.unit)
		})
	}
}
