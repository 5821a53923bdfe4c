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
