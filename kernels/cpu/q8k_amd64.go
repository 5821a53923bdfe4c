//go:build amd64

package cpu

func init() {
	if hasAVX512 {
		q8kMax, q8kBlock = vq8kMax, vq8kBlock
	}
}

func vq8kMax(x *[256]float32) uint32 { return q8kMaxAVX512(&x[0]) }

func vq8kBlock(q *[256]int8, bs *[16]int16, x *[256]float32, id float32) {
	q8kBlockAVX512(&x[0], id, &q[0], &bs[0])
}

//go:noescape
func q8kMaxAVX512(x *float32) uint32

//go:noescape
func q8kBlockAVX512(x *float32, id float32, q *int8, bs *int16)
