// Package model runs llama-family transformers (llama, mistral, qwen2, qwen3
// and smollm-style models: RMSNorm, grouped-query attention with RoPE, SwiGLU
// feed-forward, optional QKV biases, optional tied embeddings) on a
// kernels.Backend, with every token's keys and values in pages of a
// kernels.Arena that are reached only through isolation.BlockTables.
//
// Architectures (general.architecture; Archs lists them): llama and mistral
// (normal RoPE), qwen2 (NeoX RoPE, QKV biases when present), qwen3 (NeoX
// RoPE; blk.N.attn_q_norm/attn_k_norm.weight, HeadDim each, RMS-normalise
// every head of Q and K after the projection and before RoPE, with the
// model's rms epsilon, as llama.cpp's qwen3 graph does; a file without them
// is refused). attention.key_length may differ from embedding_length/heads
// (Qwen3: 128-wide heads), Q and the attention output are then Heads·HeadDim
// wide. Anything else — gemma, phi3, granite, mixture-of-experts, sliding
// windows — is refused with ErrUnsupported.
//
// Cross-check: testdata/llamacpp_logits.json holds llama.cpp's logits
// (node-llama-cpp, CPU, F32 KV, no flash attention; recorded by make
// arch-check from the files of testdata/archcheck) and TestLlamaCppLogits
// compares every position: F32 files agree within 1.8e-6 (bound 1e-3), F16
// files within 3.6e-3 (bound 1e-2, because llama.cpp rounds activations to
// F16 before an F16 dot product and we do not).
//
// Load reads the hyperparameters (block_count, embedding_length,
// feed_forward_length, attention.head_count[_kv], attention.key_length,
// attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count,
// rope.scaling.type/factor, context_length) and weights of a GGUF file and
// hands the weight bytes to the backend without conversion (F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q4_K, Q5_K, Q6_K). When output.weight is absent the token embedding
// is reused (tied embeddings).
//
// Ordering duties of the caller, per step and per sequence: Pool.Write(lease,
// n) for the n new tokens, THEN Pool.BlockTable(lease, pos+n), THEN Forward.
// Forward writes the new K/V through the table (the arena checks that every
// written page is Writable and tags it) and attends over positions 0…pos+j
// (the arena checks every read page's tag). A table the pool did not approve
// cannot be built outside the isolation package, so the forward pass cannot
// read a page that the sequence's lease does not own.
//
// The step loop that drives it:
//
//	pool.Write(l, len(toks)); bt, _ := pool.BlockTable(l, pos+len(toks))
//	logits, err := m.Forward(arena, []model.Seq{{Table: bt, Pos: pos, Tokens: toks}}, false)
//	next := argmax(logits[0]); pos += len(toks); toks = []int32{next}
//
// Determinism: on a batch-invariant backend (kernels/cpu) a sequence's logits
// are bit-identical whatever the page size, the page order, the other
// sequences in the batch and how its prompt was split into prefill chunks.
package model
