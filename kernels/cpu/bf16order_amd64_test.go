package cpu

// bf16Oracle is one output of a path's BF16 order where it has its own
// (bf16block set): bf16dpRef for avx512's; the decode kernel for the amx
// path on AMX-BF16 (its order has no Go model; TestBF16AMX holds it).
func bf16Oracle(k *kset) func(x []float32, w []uint16) float32 {
	if k.path == AMX && hasAMXBF16 {
		return func(x []float32, w []uint16) float32 {
			var out [1]float32
			vbf16amxRows(x, w, out[:])
			return out[0]
		}
	}
	return bf16dpRef
}
