package cpu

// peakFMAAVX2 runs 192·n float32 flops as twelve independent 8-lane
// multiply-add chains (BenchmarkPeak).
//
//go:noescape
func peakFMAAVX2(n int)

// peakI8AVX2 runs 192·n int8 multiply-adds as six independent chains of
// the no-VNNI int8 step (BenchmarkPeak).
//
//go:noescape
func peakI8AVX2(n int)

// peakFMACvtAVX2 is peakFMAAVX2 with four F16 conversions an iteration
// (BenchmarkPeak).
//
//go:noescape
func peakFMACvtAVX2(n int)

// peakFMAAVX512 runs 384·n float32 flops as twelve independent 16-lane
// multiply-add chains (BenchmarkPeak).
//
//go:noescape
func peakFMAAVX512(n int)

// peakFMACvtAVX512 runs 512·n float32 flops as sixteen 16-lane
// multiply-add chains with four F16 conversions an iteration, the avx512
// 4×4 F16 tile's mix (BenchmarkPeak).
//
//go:noescape
func peakFMACvtAVX512(n int)

// peakVNNI runs 768·n int8 multiply-adds as twelve independent VPDPBUSD
// chains of 64 byte products (BenchmarkPeak).
//
//go:noescape
func peakVNNI(n int)
