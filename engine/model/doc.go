// Package model runs llama-family transformers (llama, mistral, qwen2, qwen3,
// qwen3moe, mixtral and smollm-style models: RMSNorm, grouped-query attention with RoPE, SwiGLU
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
// wide.
//
// Mixtures of experts: qwen3moe (qwen3 attention; expert width
// expert_feed_forward_length) and mixtral (a llama or mistral file with
// expert_count > 0; expert width feed_forward_length). Every layer's
// feed-forward is then: router logits = ffn_gate_inp·h (Experts×DModel,
// on the backend); per token, on the host, a softmax over all experts, the
// ExpertsUsed most probable (descending, lower index first on a tie) and
// their probabilities divided by their sum — llama.cpp's build_moe_ffn with
// softmax gating and norm_w, which for Mixtral equals a softmax over the
// top-k logits; each chosen expert e runs SwiGLU with slice e of the merged
// ffn_gate_exps/ffn_up_exps/ffn_down_exps tensors (ggml dims [cols, rows,
// experts]) on the rows routed to it, and token r's output is
// Σ_j w_j·down_e(…), multiplied and added in float32 in the order j = 0…k−1
// as llama.cpp adds its expert views. Each expert's product is a
// batch-invariant backend MatMul over the gathered rows and the routing and
// sum are per token, so a sequence's logits are bit-identical whatever else
// is in the batch (TestMoEBatchInvariant). Shared experts, expert groups,
// other gating functions, expert_weights_scale ≠ 1, expert_weights_norm
// false and per-expert (unmerged) tensors are refused, and so is a MoE file
// on a backend other than cpu (kernels/cuda has not been checked with it).
// WeightBytes counts ExpertsUsed experts per layer.
//
// Anything else — gemma, phi3, granite, sliding windows — is refused with
// ErrUnsupported.
//
// Cross-check: testdata/llamacpp_logits.json holds llama.cpp's logits
// (node-llama-cpp, CPU, F32 KV, no flash attention; recorded by make
// arch-check from the files of testdata/archcheck) and TestLlamaCppLogits
// compares every position: F32 files agree within 2.1e-6 (bound 1e-3; llama
// 1.4e-6, qwen3 1.8e-6, qwen3moe 1.7e-6, mixtral 2.0e-6), F16 files within
// 3.6e-3 (bound 1e-2; qwen3 3.6e-3, qwen3moe 2.6e-3: llama.cpp rounds
// activations to F16 before an F16 dot product and we do not).
//
// Load reads the hyperparameters (block_count, embedding_length,
// feed_forward_length, attention.head_count[_kv], attention.key_length,
// attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count,
// rope.scaling.type/factor, context_length) and weights of a GGUF file and
// hands the weight bytes to the backend without conversion (F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). When output.weight is absent the token embedding
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
//
// # Run a real GGUF
//
//	go run ./engine/model/testdata/generate -m smollm2-135m-instruct-q8_0.gguf \
//	    -p "What is the capital of France?" -n 64        # greedy; -temp 0.7 to sample
//
// It memory-maps the file, builds the tokenizer from its metadata (SmolLM2:
// gpt2 vocabulary, pre-tokenizer smollm, ChatML template), loads the weights on
// the CPU backend (tied embeddings), leases KV pages from an isolation.Pool,
// and prints the continuation with prefill/decode speeds. YaRN rope scaling,
// sliding-window attention and other architectures are refused with a clear
// error.
//
// # Checked by tests
//
//   - Logits of synthetic models match a float64 dense-KV reference forward
//     pass.
//   - Paged equals contiguous, bit for bit, whatever the page size, page
//     order, prefill chunking or batch companions.
//   - A stale or unapproved block table reads nothing (isolation_violation, no
//     logits).
//
// Benchmarks: go test -run XXX -bench 'Prefill|Decode' -benchtime 5x
// ./engine/model — prefill and decode tokens/s at batch 1 and 16 for a 4-layer
// d=512 model (Q8_0, F32) and a ~100M model (Q8_0), and decode bandwidth
// efficiency = weight bytes streamed per second ÷ copy() bandwidth measured in
// the same run. make peer-quant compares logits per weight type with
// llama.cpp's.
package model
