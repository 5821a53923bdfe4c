// Package kernels defines the compute interface between the engine and a
// device: Backend (tensor operations and matrix products over GGUF weight
// types), Arena (a paged KV cache whose pages carry isolation.Tag ownership
// tags) and the registry through which backends make themselves available.
//
// Guarantees every backend gives (kernelstest checks them):
//
//   - Results match the float64 reference in kernels/reference within the
//     tolerances that kernelstest states.
//   - Determinism and batch invariance: one row's result is bit-identical
//     whatever else is in the batch and whatever the thread count.
//   - A page's KV contents are read only through an isolation.BlockTable, and
//     only after the page's arena tag equals the table's tag and every slot
//     read was written under that tag; otherwise a *TagMismatchError or an
//     *UnwrittenError (code isolation_violation) and no output is written.
//   - A page that changes owner is zeroed before the new owner's first write;
//     a transfer copy carries zeros for slots its table does not cover.
//   - ZeroPages leaves the pages' bytes zero and their tags zero.
//
// Optional capabilities (ext.go), found by type assertion: Scaler
// (ggml_scale), GeGLUer (tanh-gelu GeGLU) and, on arenas, WindowAttender
// (attention with a score scale and a standard sliding window, the same
// page checks as Attention). kernels/cpu has them; kernelstest checks them
// where present and skips them where not; a model that needs one refuses a
// backend without it.
//
// The loop that drives a backend (one engine step of a llama-family model):
//
//	b.Embed(x, tokEmbd, ids)                  // ids of every row in the batch
//	for l := range layers {
//		b.RMSNorm(h, x, attnNorm[l], eps)
//		kernels.MultiMatMul(b, []Tensor{q, k, v}, h, []Matrix{wq[l], wk[l], wv[l]})
//		b.RoPE(q, pos, rope); b.RoPE(k, pos, ropeK)
//		arena.WriteKV(l, k, v, spans)         // after Pool.Write, with fresh tables
//		arena.Attention(l, att, q, spans)     // tag-checked reads
//		b.MatMul(o, att, wo[l]); b.Add(x, x, o)
//		... feed-forward: RMSNorm, gate/up, SwiGLU, down, Add
//	}
//	b.RMSNorm(x, x, outNorm, eps); b.Copy(last, x.Slice(...)); b.MatMul(logits, last, out)
//	b.Download(host, logits)
//
// Backends: kernels/cpu (pure Go, the default and the oracle) registers as
// "cpu"; a CUDA backend registers from files built with the cuda tag.
package kernels
