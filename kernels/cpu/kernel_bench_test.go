package cpu

import (
	"fmt"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// Benchmarks of the decode inner loops on cached data (4 weight rows of
// 4096), per kernel path: the compute ceiling of one core, without memory
// bandwidth limits. Compare paths within one run (path ÷ generic), never
// across runs: the machines are shared.
func BenchmarkDecodeKernel(b *testing.B) {
	const n = 4096
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%13) * 0.1
	}
	w16 := make([][]uint16, 4)
	wf := make([][]float32, 4)
	for r := range 4 {
		wf[r] = make([]float32, n)
		for i := range wf[r] {
			wf[r][i] = float32((i+r)%7) * 0.25
		}
		w16[r] = make([]uint16, n)
		for i, v := range wf[r] {
			w16[r][i] = kernels.F32ToF16(v)
		}
	}
	var sink float32
	gflops := func(b *testing.B, flops float64) {
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	for _, p := range Paths() {
		k := kernelSet(p)
		b.Run(fmt.Sprintf("F32/path=%s", p), func(b *testing.B) {
			b.SetBytes(4 * n * 4)
			for b.Loop() {
				s, _, _, _ := k.dot1x4(x, wf[0], wf[1], wf[2], wf[3])
				sink += s
			}
			gflops(b, 8*n)
		})
		b.Run(fmt.Sprintf("F16/path=%s", p), func(b *testing.B) {
			b.SetBytes(4 * n * 2)
			for b.Loop() {
				s, _, _, _ := k.f16dot1x4(x, w16[0], w16[1], w16[2], w16[3])
				sink += s
			}
			gflops(b, 8*n)
		})
		// Block types through MatMul with 64 weight rows (at most 278 KB,
		// in L2), so that the per-call work (quantizing x on the vector
		// paths) is amortised as in a real decode step.
		for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q6_K} {
			b.Run(fmt.Sprintf("%v/path=%s", dt, p), func(b *testing.B) {
				be, err := NewWithPath(kernels.Options{Threads: 1}, p)
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				var data []byte
				for r := range 64 {
					q, err := kernels.Quantize(dt, wf[r%4])
					if err != nil {
						b.Fatal(err)
					}
					data = append(data, q...)
				}
				m, err := be.NewMatrix(dt, 64, n, data)
				if err != nil {
					b.Fatal(err)
				}
				xt, _ := be.NewTensor(1, n)
				be.Upload(xt, x)
				dst, _ := be.NewTensor(1, 64)
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					be.MatMul(dst, xt, m)
				}
				gflops(b, 2*64*n)
			})
		}
	}
	_ = sink
}

func BenchmarkDequantQ4K(b *testing.B) {
	src := make([]float32, 256)
	for i := range src {
		src[i] = float32(i%17) - 8
	}
	q, _ := kernels.Quantize(kernels.Q4_K, src)
	blk := (*[144]byte)(q)
	var y [256]float32
	b.Run("table", func(b *testing.B) {
		b.SetBytes(256 * 4)
		for b.Loop() {
			dequantQ4K(&y, blk)
		}
	})
	b.Run("reference-decoder", func(b *testing.B) {
		b.SetBytes(256 * 4)
		for b.Loop() {
			kernels.DequantizeQ4KBlock(y[:], q)
		}
	})
}

// BenchmarkDecodeBatch: one decode step's product (x of 1 or 16 rows, a
// 2048×768 weight, as a d=768 model's FFN) per weight type on the fastest
// path; tok/s is rows per second of wall time, tok/cpu-s per second of
// CPU time (steadier on a shared machine), GOP/s the product's 2·rows·
// 2048·768 operations per second of wall time. weights=cached multiplies
// the one matrix (L2-resident for Q8_0 and Q4_K); weights=streamed cycles
// through 32 such matrices (53 MB of Q8_0, more than the L3 of the
// machines measured), as a model's decode step does. F16 also runs with the
// table conversion of the scratch blocks (halfRow off), to compare within
// one run.
func BenchmarkDecodeBatch(b *testing.B) {
	const n, rowsW = 768, 2048
	p := Paths()[len(Paths())-1]
	for _, dt := range []kernels.DType{kernels.F16, kernels.Q8_0, kernels.Q4_K} {
		var data [][]byte
		for i := range 32 {
			w := make([]float32, rowsW*n)
			for j := range w {
				w[j] = float32((j*7+i)%13-6) * 0.05
			}
			d, err := kernels.Quantize(dt, w)
			if err != nil {
				b.Fatal(err)
			}
			data = append(data, d)
		}
		for _, off := range []string{"", "halfRow=off"} {
			if off == "halfRow=off" && dt != kernels.F16 {
				continue
			}
			for _, set := range []string{"cached", "streamed"} {
				for _, rows := range []int{1, 16} {
					name := fmt.Sprintf("%v/weights=%s/rows=%d", dt, set, rows)
					if off != "" {
						name += "/" + off
					}
					b.Run(name, func(b *testing.B) {
						be, err := NewWithPath(kernels.Options{Threads: 1}, p)
						if err != nil {
							b.Fatal(err)
						}
						defer be.Close()
						k := *be.k
						if off == "halfRow=off" {
							k.halfRow = nil
						}
						be.k = &k
						nm := 1
						if set == "streamed" {
							nm = len(data)
						}
						ms := make([]kernels.Matrix, nm)
						for i := range ms {
							ms[i], _ = be.NewMatrix(dt, rowsW, n, data[i])
						}
						x, _ := be.NewTensor(rows, n)
						xs := make([]float32, rows*n)
						for i := range xs {
							xs[i] = float32(i%11) * 0.1
						}
						be.Upload(x, xs)
						dst, _ := be.NewTensor(rows, rowsW)
						t0, i := cpuTime(), 0
						for b.Loop() {
							be.MatMul(dst, x, ms[i%nm])
							i++
						}
						b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
						if c := cpuTime() - t0; c > 0 {
							b.ReportMetric(float64(rows)*float64(b.N)/c.Seconds(), "tok/cpu-s")
						}
						b.ReportMetric(2*float64(rows)*rowsW*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
					})
				}
			}
		}
	}
}
