package cpu

import (
	"math"

	"github.com/cloison/cloison/kernels"
)

// eachRow calls fn(r) for every row r in [0, n), in parallel when there is
// enough work. A row's result never depends on which thread computes it.
func (b *Backend) eachRow(n, cols int, fn func(r int)) {
	const minWork = 1 << 14 // elements below which threads cost more than they save
	if n*cols < minWork || n == 1 {
		for r := range n {
			fn(r)
		}
		return
	}
	per := max(1, minWork/cols) // rows per task
	b.w.run((n+per-1)/per, func(t int) {
		for r := t * per; r < min(n, (t+1)*per); r++ {
			fn(r)
		}
	})
}

func (b *Backend) sameShape(what string, ts ...kernels.Tensor) ([]*tensor, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	out := make([]*tensor, len(ts))
	for i, t := range ts {
		ct, err := b.tensor(t, what)
		if err != nil {
			return nil, err
		}
		if i > 0 && (ct.rows != out[0].rows || ct.cols != out[0].cols) {
			return nil, shapeErr("%s of %d×%d and %d×%d tensors", what, out[0].rows, out[0].cols, ct.rows, ct.cols)
		}
		out[i] = ct
	}
	return out, nil
}

// Embed sets dst row r to row ids[r] of w.
func (b *Backend) Embed(dst kernels.Tensor, w kernels.Matrix, ids []int32) error {
	if err := b.check(); err != nil {
		return err
	}
	d, err := b.tensor(dst, "embedding output")
	if err != nil {
		return err
	}
	m, err := b.matrix(w)
	if err != nil {
		return err
	}
	if d.rows != len(ids) || d.cols != m.cols {
		return shapeErr("embedding of %d ids (width %d) into %d×%d", len(ids), m.cols, d.rows, d.cols)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.rows {
			return shapeErr("token id %d outside the vocabulary of %d", id, m.rows)
		}
	}
	b.eachRow(d.rows, d.cols, func(r int) { m.dequantRow(d.row(r), int(ids[r])) })
	return nil
}

// RMSNorm sets dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ weight, per group
// of weight.Cols() elements (see kernels.Backend). The sum of squares is
// taken in float64 over four interleaved partial sums combined in
// a fixed order.
func (b *Backend) RMSNorm(dst, x, weight kernels.Tensor, eps float32) error {
	ts, err := b.sameShape("rmsnorm", dst, x)
	if err != nil {
		return err
	}
	w, err := b.tensor(weight, "rmsnorm weight")
	if err != nil {
		return err
	}
	d, xt := ts[0], ts[1]
	if w.rows != 1 || w.cols == 0 || xt.cols%w.cols != 0 {
		return shapeErr("rmsnorm weight %d×%d for rows of %d", w.rows, w.cols, xt.cols)
	}
	if !(eps >= 0) {
		return shapeErr("rmsnorm eps %v", eps)
	}
	wr, g := w.row(0), w.cols
	b.eachRow(xt.rows, xt.cols, func(r int) {
		in, out := xt.row(r), d.row(r)
		for j := 0; j < len(in); j += g {
			rmsGroup(out[j:j+g], in[j:j+g], wr, eps)
		}
	})
	return nil
}

// rmsGroup sets out = in / sqrt(mean(in²) + eps) ⊙ wr for one group.
func rmsGroup(out, in, wr []float32, eps float32) {
	var s0, s1, s2, s3 float64
	n4 := len(in) &^ 3
	for i := 0; i < n4; i += 4 {
		v := (*[4]float32)(in[i:])
		s0 += float64(v[0]) * float64(v[0])
		s1 += float64(v[1]) * float64(v[1])
		s2 += float64(v[2]) * float64(v[2])
		s3 += float64(v[3]) * float64(v[3])
	}
	ss := (s0 + s1) + (s2 + s3)
	for _, v := range in[n4:] {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(in))+float64(eps)))
	out = out[:len(in)]
	wr = wr[:len(in)]
	for i, v := range in {
		out[i] = float32(v*scale) * wr[i]
	}
}

// RoPE rotates x in place. Angles are computed in float64 per row, the
// rotation in float32.
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, p kernels.RoPE) error {
	if err := b.check(); err != nil {
		return err
	}
	xt, err := b.tensor(x, "rope input")
	if err != nil {
		return err
	}
	dims, err := p.Check(xt.cols, xt.rows, len(pos))
	if err != nil {
		return err
	}
	scale := float64(p.Scale)
	if scale == 0 {
		scale = 1
	}
	half := dims / 2
	freq := make([]float64, half)
	for i := range freq {
		freq[i] = scale * math.Pow(float64(p.Base), -2*float64(i)/float64(dims))
		if p.Factors != nil {
			freq[i] /= float64(p.Factors[i])
		}
	}
	b.eachRow(xt.rows, xt.cols, func(r int) {
		var buf [512]float32 // on the stack for heads up to 512 wide: no allocation per row
		var cs []float32     // cos, sin interleaved
		if 2*half <= len(buf) {
			cs = buf[:2*half]
		} else {
			cs = make([]float32, 2*half)
		}
		for i, f := range freq {
			s, c := math.Sincos(float64(pos[r]) * f)
			cs[2*i], cs[2*i+1] = float32(c), float32(s)
		}
		row := xt.row(r)
		for h := 0; h+p.HeadDim <= len(row); h += p.HeadDim {
			head := row[h : h+p.HeadDim]
			for i := range half {
				a, bb := 2*i, 2*i+1
				if p.NeoX {
					a, bb = i, i+half
				}
				c, s := cs[2*i], cs[2*i+1]
				x0, x1 := head[a], head[bb]
				head[a] = float32(x0*c) - float32(x1*s)
				head[bb] = float32(x0*s) + float32(x1*c)
			}
		}
	})
	return nil
}

// SwiGLU sets dst = silu(gate) ⊙ up.
func (b *Backend) SwiGLU(dst, gate, up kernels.Tensor) error {
	if b.k.expSub != nil {
		ts, err := b.sameShape("swiglu", dst, gate, up)
		if err != nil {
			return err
		}
		d, g, u := ts[0], ts[1], ts[2]
		b.eachRow(d.rows, d.cols, func(r int) { b.k.siluRow(d.row(r), g.row(r), u.row(r)) })
		return nil
	}
	return b.gated("swiglu", dst, gate, up, silu)
}

// siluChunk is the number of exponentials siluRow computes per expSub call
// (a stack buffer: no allocation per row).
const siluChunk = 256

// siluRow sets out[i] = silu(g[i])·u[i] (u nil: silu(g[i])) with the bits
// of silu: expf(−g) by the path's vector exponential (expf's bits), then
// the same float32 division and product. out may alias g or u.
func (k *kset) siluRow(out, g, u []float32) {
	var e [siluChunk]float32
	g = g[:len(out)]
	if u != nil {
		u = u[:len(out)]
	}
	if k.silu != nil {
		n := k.silu(out, g, u)
		out, g = out[n:], g[n:]
		if u != nil {
			u = u[n:]
		}
	}
	for c := 0; c < len(out); c += siluChunk {
		n := min(siluChunk, len(out)-c)
		es := e[:n]
		for i := range es {
			es[i] = -g[c+i]
		}
		k.expSub(es, 0) // −g − 0 is −g, signed zeros and NaN included
		if u == nil {
			for i, v := range es {
				out[c+i] = g[c+i] / (1 + v)
			}
			continue
		}
		for i, v := range es {
			s := g[c+i] / (1 + v)
			out[c+i] = s * u[c+i]
		}
	}
}

// gated sets dst = act(gate) ⊙ up, row by row on the workers.
func (b *Backend) gated(op string, dst, gate, up kernels.Tensor, act func(float32) float32) error {
	ts, err := b.sameShape(op, dst, gate, up)
	if err != nil {
		return err
	}
	d, g, u := ts[0], ts[1], ts[2]
	b.eachRow(d.rows, d.cols, func(r int) {
		out, gr, ur := d.row(r), g.row(r), u.row(r)
		gr, ur = gr[:len(out)], ur[:len(out)]
		for i := range out {
			out[i] = act(gr[i]) * ur[i]
		}
	})
	return nil
}

// SiLU sets dst = x·sigmoid(x).
func (b *Backend) SiLU(dst, x kernels.Tensor) error {
	ts, err := b.sameShape("silu", dst, x)
	if err != nil {
		return err
	}
	d, xt := ts[0], ts[1]
	if b.k.expSub != nil {
		b.eachRow(d.rows, d.cols, func(r int) { b.k.siluRow(d.row(r), xt.row(r), nil) })
		return nil
	}
	b.eachRow(d.rows, d.cols, func(r int) {
		out, in := d.row(r), xt.row(r)
		in = in[:len(out)]
		for i := range out {
			out[i] = silu(in[i])
		}
	})
	return nil
}

func silu(v float32) float32 { return v / (1 + expf(-v)) }

// Softmax replaces each row of x by its softmax; the normaliser is summed in
// float64, in order.
func (b *Backend) Softmax(x kernels.Tensor) error {
	ts, err := b.sameShape("softmax", x)
	if err != nil {
		return err
	}
	xt := ts[0]
	b.eachRow(xt.rows, xt.cols, func(r int) { softmax(xt.row(r)) })
	return nil
}

func softmax(row []float32) {
	m := float32(math.Inf(-1))
	for _, v := range row {
		m = max(m, v)
	}
	var s float64
	for i, v := range row {
		e := expf(v - m)
		row[i] = e
		s += float64(e)
	}
	inv := float32(1 / s)
	for i := range row {
		row[i] *= inv
	}
}

// Add sets dst = a + b, b broadcast when it has one row.
func (b *Backend) Add(dst, a, bt kernels.Tensor) error {
	ts, err := b.sameShape("add", dst, a)
	if err != nil {
		return err
	}
	d, at := ts[0], ts[1]
	c, err := b.tensor(bt, "add operand")
	if err != nil {
		return err
	}
	if c.cols != at.cols || (c.rows != at.rows && c.rows != 1) {
		return shapeErr("add of %d×%d and %d×%d", at.rows, at.cols, c.rows, c.cols)
	}
	b.eachRow(d.rows, d.cols, func(r int) {
		out, ar := d.row(r), at.row(r)
		br := c.row(0)
		if c.rows != 1 {
			br = c.row(r)
		}
		ar, br = ar[:len(out)], br[:len(out)]
		for i := range out {
			out[i] = ar[i] + br[i]
		}
	})
	return nil
}

// Copy copies src into dst.
func (b *Backend) Copy(dst, src kernels.Tensor) error {
	ts, err := b.sameShape("copy", dst, src)
	if err != nil {
		return err
	}
	copy(ts[0].data, ts[1].data)
	return nil
}

// expf is a float32 exponential (Cephes expf: range reduction by ln 2 and a
// degree-6 polynomial), accurate to about 2 ulp, deterministic, and much
// faster than math.Exp. exp(x) underflows to 0 below −87.3 and saturates at
// the largest finite float near 88.7; NaN gives NaN.
func expf(x float32) float32 {
	const (
		hi    = 88.72283
		lo    = -87.33654
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	if x != x {
		return x
	}
	if x > hi {
		x = hi
	}
	if x < lo {
		return 0
	}
	fx := float32(math.Floor(float64(float32(x*log2e) + 0.5)))
	x = x - float32(fx*c1)
	x = x - float32(fx*c2)
	z := float32(x * x)
	y := float32(float32(1.9875691500e-4*x) + 1.3981999507e-3)
	y = float32(float32(y*x) + 8.3334519073e-3)
	y = float32(float32(y*x) + 4.1665795894e-2)
	y = float32(float32(y*x) + 1.6666665459e-1)
	y = float32(float32(y*x) + 5.0000001201e-1)
	y = float32(float32(y*z)+x) + 1
	// y · 2^fx, in two steps so that fx = 128 (x near hi) does not overflow
	// the exponent field.
	n := int32(fx)
	if n > 127 {
		y *= 2
		n--
	}
	return y * math.Float32frombits(uint32(n+127)<<23)
}
