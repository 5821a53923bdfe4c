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
// Q8_0 or k-quant block on AVX2); with AVX-512 the same on zmm (fma512;
// fma512+cvt: four VCVTPH2PS to sixteen multiply-adds, the 4×4 F16 tile's
// mix) and with AVX512_VNNI VPDPBUSD's 64 byte products (vnni).
func BenchmarkPeak(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	const n = 1 << 16
	for _, c := range []struct {
		name, unit string
		ok         bool
		per        float64 // flops or multiply-adds an iteration
		run        func(int)
	}{
		{"fma", "GFLOP/s", true, 192, peakFMAAVX2},
		{"int8", "GMAC/s", true, 192, peakI8AVX2},
		{"fma+cvt", "GFLOP/s", true, 192, peakFMACvtAVX2},
		{"fma512", "GFLOP/s", hasAVX512, 384, peakFMAAVX512},
		{"fma512+cvt", "GFLOP/s", hasAVX512, 512, peakFMACvtAVX512},
		{"vnni", "GMAC/s", hasVNNI, 768, peakVNNI},
	} {
		b.Run(c.name, func(b *testing.B) {
			if !c.ok {
				b.Skip("not on this CPU")
			}
			for b.Loop() {
				c.run(n)
			}
			b.ReportMetric(c.per*n*float64(b.N)/b.Elapsed().Seconds()/1e9, c.unit)
		})
	}
}
