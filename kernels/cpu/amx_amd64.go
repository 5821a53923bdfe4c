//go:build amd64

package cpu

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

// hasAMX: the CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24, 25)
// besides AVX-512 VNNI, and the OS granted the tile state (amxPermit).
var hasAMX = hasVNNI && cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && amxPermit()

// vq8amx computes, for ng groups of 16 activation rows (xt, xd: the groups
// of q8acts.t and q8acts.td) and the m ≤ 16 Q8_0 weight rows at
// w[j·stride:], s.out[g·256+16j+r] = the product of the group's row r with
// weight row j, with q8rowsVNNI's bits.
//
// The integers come from AMX: for each block and each of its 8 dwords
// (lane l), TDPBSSD of the m weight rows' dword l (A: m rows × 4 bytes,
// loaded in place from the weights, stride apart) with the 16 activation
// rows' dword l (B: one row of 64 bytes, q8acts.t) gives m×16 int32, each
// the exact Σ of one lane's 4 products, the integer of VPDPBUSD's lane in
// the VNNI kernels (signed×signed: no bias, no −128·Σ correction). The
// float steps are q8rowsVNNI's, per lane and block in order:
// acc_l = fma(float32(int), round32(d_w·d_x), acc_l) with the 16 activation
// rows in a register's lanes (so the scale product is computed once per
// block and weight row for all 8 lanes), then the lanes summed as HSUM8,
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). Every output so has the bits of the
// one-row kernels whatever the batch and the group.
//
// The tile configuration is loaded and the tiles released (TILERELEASE)
// inside the one assembly call: no tile state outlives it, whichever OS
// thread the goroutine runs on next.
func vq8amx(w []byte, stride, m, nb int, xt []int8, xd []float32, ng int, s *amxScratch) {
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nb < 1 || stride < nb*34 ||
		len(w) < (m-1)*stride+nb*34 || len(xt) < ng*16*nb*32 || len(xd) < ng*16*nb {
		panic("kernels/cpu: q8amx arguments")
	}
	// Palette 1; tmm0–3 the int32 outputs (m rows of 16 dwords), tmm4–5
	// the weights (m rows of 4 bytes), tmm6–7 the activations (1 row of 64
	// bytes).
	cfg := s.b[:64]
	clear(cfg)
	cfg[0] = 1
	for t := range 8 {
		colsb, rows := 64, m
		switch {
		case t == 4 || t == 5:
			colsb = 4
		case t >= 6:
			rows = 1
		}
		binary.LittleEndian.PutUint16(cfg[16+2*t:], uint16(colsb))
		cfg[48+t] = byte(rows)
	}
	q8amxTile(&w[0], stride, nb, &xt[0], &xd[0], ng, &s.out[0], &s.b[0], m)
}

//go:noescape
func q8amxTile(w *byte, stride, nb int, xt *int8, xd *float32, ng int, out *float32, scr *byte, m int)
