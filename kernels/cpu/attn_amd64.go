//go:build amd64

package cpu

// vwsum sets o += Σ_p s[p]·data[offs[p]:][:len(o)] with the per-element
// chain of vaxpy4/vaxpy1 (fused multiply-adds in position order), o kept in
// registers: 64-float chunks on avx512, 32 on avx2. It reports false (and
// does nothing) when len(o) is not a multiple of the chunk.
func vwsum(wide bool, o, s, data []float32, offs []int) bool {
	chunk := 32
	if wide {
		chunk = 64
	}
	hd, n := len(o), len(offs)
	if hd == 0 || hd%chunk != 0 || len(s) < n {
		return false
	}
	if n == 0 {
		return true
	}
	for _, off := range offs {
		if off < 0 || off+hd > len(data) {
			panic("kernels/cpu: attention value outside the arena")
		}
	}
	for c := 0; c < hd; c += chunk {
		if wide {
			wsum64AVX512(&o[c], &s[0], &data[c], &offs[0], n)
		} else {
			wsum32AVX2(&o[c], &s[0], &data[c], &offs[0], n)
		}
	}
	return true
}

//go:noescape
func wsum64AVX512(o *float32, s *float32, base *float32, offs *int, n int)

//go:noescape
func wsum32AVX2(o *float32, s *float32, base *float32, offs *int, n int)
