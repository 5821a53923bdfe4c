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
// (ggml_scale), GeGLUer (tanh-gelu GeGLU), LowRankAdder (a LoRA adapter's
// expand as a sum of scaled rows; engine/model falls back to MatMul, Scale
// and Add without it) and, on arenas, WindowAttender
// (attention with a score scale, a standard sliding window, bidirectional
// spans, and T5's relative-position bias with RelativeBucket's buckets —
// AttentionOptions; the same page checks as Attention). kernels/cpu has them (LowRankAdder is tested
// in kernels/cpu, not in kernelstest); kernelstest checks the others
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
//
// # Interface details
//
// Tensors are backend-owned float32 (Upload/Download only at the edges of a
// step); weight matrices are wrapped in place from GGUF bytes (F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4 — GGML type
// numbers, GGUF block layouts). Operations: matrix products, RMSNorm, RoPE
// (normal/NeoX, base, linear scale, llama3 frequency factors), SiLU/SwiGLU,
// softmax, add (with bias broadcast), embedding lookup, and a paged KV Arena.
// An arena stores K and V as float32 (KVF32, the default) or IEEE halves
// (ArenaConfig.KV = KVF16: half the bytes; each element rounded to the
// nearest half, ties to even, when written, and attention computes over the
// rounded values). ParseKVType reads "f32"/"f16"; a backend that does not
// store a type refuses it in NewArena with ErrKVType (kernels/cuda: f32
// only). The transfer format of a page is its stored type, little-endian,
// [layer][K, V][slot][kv_head][head_dim]; pages move between arenas of the
// same configuration.
// Backends register by name (kernels.Open("cpu", …)); optional capabilities
// are interfaces (MultiMatMuler).
//
// kernelstest.Run checks the guarantees for every backend; products are
// within the float32 worst-case summation bound. A table older than the page's
// contents (a released lease's) cannot write; transfers (CopyOut/CopyIn) use a
// fixed little-endian format (float32 or binary16, as the arena stores). The
// arena tests run again with KVF16 arenas against the reference over the
// rounded K and V.
//
// Options.Unsafe.SkipOwnershipChecks turns the arena's tag and fill checks
// off; it exists only with -tags faults, for the engine's tests that prove the
// other layers fail closed without it.
//
// Commands:
//
//	go test ./kernels/...                                   # conformance on every path, properties
//	go test -run '^$' -bench . ./kernels/cpu                # GFLOP/s, GB/s per path, x-copy
//	cloisonctl bench MODEL.gguf --prompt 128,2048 --batch 1,16 --threads 1,2 --json
//	make peer-bench                                         # ours ÷ llama.cpp (node-llama-cpp 3.22.1)
//	make peer-quant                                         # logits per weight type vs llama.cpp's
package kernels
