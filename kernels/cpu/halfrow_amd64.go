//go:build amd64

package cpu

// Row conversions of F16 and BF16 weights on the vector paths (dot_amd64.s):
// the scratch blocks of decode batches and prefill get the values of f16tab
// and bf16 sixteen to thirty-two at a time instead of one table load each.

// vhalfRow sets dst[i] to the float32 of src[i] (bf: BF16, else F16).
func vhalfRow(bf bool, dst []float32, src []uint16) {
	n := len(src)
	dst = dst[:n]
	nv := n &^ 7
	if nv > 0 {
		if bf {
			bf16rowAVX2(&dst[0], &src[0], nv)
		} else {
			f16rowAVX2(&dst[0], &src[0], nv)
		}
	}
	for i := nv; i < n; i++ {
		if bf {
			dst[i] = bf16(src[i])
		} else {
			dst[i] = f16tab[src[i]]
		}
	}
}

// vhalfRows is kset.halfRows on the vector paths (f16rowsAVX2).
func vhalfRows(dst []float32, src []uint16, n, rows, stride int) {
	if rows <= 0 {
		return
	}
	if n <= 0 || n%16 != 0 || stride < n {
		panic("kernels/cpu: half rows shapes")
	}
	_, _ = dst[rows*n-1], src[(rows-1)*stride+n-1]
	f16rowsAVX2(&dst[0], &src[0], n, rows, stride)
}

//go:noescape
func f16rowsAVX2(dst *float32, src *uint16, n, rows, stride int)

//go:noescape
func f16rowAVX2(dst *float32, src *uint16, n int)

//go:noescape
func bf16rowAVX2(dst *float32, src *uint16, n int)
