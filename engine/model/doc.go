// Package model runs llama-family transformers (llama, mistral, qwen2, qwen3,
// qwen3moe, mixtral, gemma3, phi3, granite and smollm-style models: RMSNorm,
// grouped-query attention with RoPE, SwiGLU or GeGLU feed-forward, optional
// mixtures of experts, optional QKV biases, optional tied embeddings,
// optional sliding windows) on a kernels.Backend, with every token's keys
// and values in pages of a kernels.Arena that are reached only through
// isolation.BlockTables.
//
// Architectures (general.architecture; Archs lists them): llama and mistral
// (normal RoPE), qwen2 (NeoX RoPE, QKV biases when present), qwen3 (NeoX
// RoPE; blk.N.attn_q_norm/attn_k_norm.weight, HeadDim each, RMS-normalise
// every head of Q and K after the projection and before RoPE, with the
// model's rms epsilon, as llama.cpp's qwen3 graph does; a file without them
// is refused). attention.key_length may differ from embedding_length/heads
// (Qwen3: 128-wide heads), Q and the attention output are then Heads·HeadDim
// wide. As llama.cpp's graphs (src/models/*.cpp) compute them:
//
//   - gemma3: qwen3's Q/K norms and NeoX RoPE; embeddings × sqrt(d_model);
//     post_attention_norm and post_ffw_norm RMS-normalise each sublayer's
//     output before its residual add; GeGLU (tanh gelu, gate ⊙ up); norm
//     weights are used as stored (llama.cpp's converter has already added
//     gemma's 1); score scale 1/sqrt(head_dim), 1/sqrt(d_model/heads) for
//     the 62-layer 27B; attention.sliding_window with
//     attention.sliding_window_pattern (a per-layer bool array or a period
//     n, layer l local unless l%n = n−1; default 6: five local layers, then
//     a global one); local layers use rope.freq_base_swa (default 10000) and
//     no rope scaling; final_logit_softcapping when present. A nonzero
//     attn_logit_softcapping (gemma2) is refused.
//   - phi3: NeoX RoPE, partial rotary by rope.dimension_count; attn_qkv
//     holds the Q, K and V rows and ffn_up the gate then the up rows (no
//     ffn_gate). Fused attn_qkv (and its bias) is accepted for every
//     architecture, as llama.cpp's create_tensor_qkv does, wrapped as three
//     matrices over the same bytes. Long-rope factor tensors are refused.
//   - granite: llama's layout; granite.logit_scale (required) divides the
//     logits; embedding_scale, residual_scale (multiplies each sublayer's
//     output before the residual add) and attention.scale (the score
//     scale) when present. Biases and rope.scaling.finetuned false
//     (no RoPE) are refused.
//   - Sliding windows on every architecture: a positive
//     <arch>.attention.sliding_window makes every layer local (mistral-style)
//     unless a pattern says otherwise; a local layer's query at position p
//     reads the K/V of positions p−W+1…p only (kernels.WindowAttender). The
//     pages of older positions stay leased and tag-checked but are not read.
//     llama.cpp ignores the window of llama and phi3 files ("Phi SWA is
//     currently disabled"); we apply it, as the model defines it, so those
//     files differ from llama.cpp's logits past the window.
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
// false, per-expert (unmerged) tensors and experts beside gemma3's GeGLU
// and post norms or granite's residual scale are refused, and so is a MoE
// file on a backend other than cpu (kernels/cuda has not been checked with
// it).
// WeightBytes counts ExpertsUsed experts per layer.
//
// YaRN and anything else are refused with ErrUnsupported. The
// architectures that need optional backend capabilities (kernels.Scaler for
// embedding/residual scales, kernels.GeGLUer, and an arena with
// kernels.WindowAttender for windows and score scales) are refused on a
// backend without them (kernels/cuda today): Load or Forward returns
// ErrUnsupported and computes nothing. Logit scale and soft-cap are applied
// on the host after Download, on every backend.
//
// Cross-check: testdata/llamacpp_logits.json holds llama.cpp's logits
// (node-llama-cpp, CPU, F32 KV, no flash attention; recorded by make
// arch-check from the files of testdata/archcheck) and TestLlamaCppLogits
// compares every position: F32 files agree within 2.1e-6 (bound 1e-3;
// llama 1.4e-6, qwen3 1.8e-6, qwen3moe 1.7e-6, mixtral 2.0e-6, phi3
// 1.4e-6, granite 4.8e-7), F16 files within 3.6e-3 (bound 1e-2; qwen3
// 3.6e-3, qwen3moe 2.6e-3: llama.cpp rounds activations to F16 before an
// F16 dot product and we do not). gemma3 agrees within 1.9e-3 (bound 3e-3)
// because llama.cpp's CPU GeGLU reads gelu from an F16 table
// (GGML_GELU_FP16) where ours evaluates it in float64; with that table's
// GeGLU swapped into the CPU backend for the test, within 1.7e-4 (bound
// 1e-3), windows, local rope base and soft-cap included.
//
// Load reads the hyperparameters (those above and block_count, embedding_length,
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
// Output rows only in the last layer: when a batch needs fewer rows than it
// holds (a prompt's logits are its last row's, unless Seq.All or
// Seq.Hidden or Forward's all asks for every row), the last layer writes
// every row's K/V and then computes attention, its output projection and
// the feed-forward on the output rows alone, as llama.cpp's graphs do (no
// later layer reads the others; every kernel past the KV writes is
// row-wise, so the bits do not change; TestSeqAll holds them to a
// whole-batch forward with windowed attention, post norms, experts and
// LoRA adapters). An 8-layer model spends an eighth of its prefill less
// (d=768 F16, 128 tokens, 1 thread, AMD EPYC Zen 3: about +10% tok/s).
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
// phi3 long-rope factors, gemma2-style attention soft-capping, shared experts
// and other architectures are refused with a clear error (mixtures of
// experts, gemma3, windows and granite's scales need the CPU backend: the
// CUDA backend refuses them).
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
// LoRA adapters (LoadAdapter): GGUF adapters as llama.cpp's
// convert_lora_to_gguf.py writes them (general.type adapter, adapter.type
// lora, adapter.lora.alpha, pairs <base tensor>.lora_a [in, rank] and
// .lora_b [rank, out]), checked against the base's shapes as
// llama_adapter_lora_init checks them; Adapter.Digest is the SHA-256 of the
// file. A Seq with Adapter gets, after each adapted projection's base
// product, scale·B·(A·x) with scale = alpha/rank (1 without alpha), as
// build_lora_mm adds it; the base product runs once for the batch and each
// adapter's rows are gathered for its two low-rank products (Punica/S-LoRA:
// the shrink A·x a matrix product, the expand on a kernels.LowRankAdder a
// sum of Rank scaled rows of Bᵀ into the rows, else MatMul, Scale, Add), so
// rows stay batch invariant (TestLoRABatchInvariant,
// TestLoRAWithoutLowRankAdder). Adapted: attn_q,
// attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down and an untied
// output.weight; token_embd, fused tensors and experts are refused. Logits
// match llama.cpp's with the same files (TestLlamaCppLoRALogits, make
// lora-check: 1.8e-6 on F32 weights) and the merged weights W + scale·B·A
// (TestLoRAMatchesMergedWeights). CPU backend only.
//
// Embeddings: Config.Pooling is {arch}.pooling_type as llama.cpp reads it
// (1 mean, 2 CLS, 3 last; 4 rank for a decoder reranker, below; anything
// else PoolNone). A Seq with Hidden gets,
// instead of logits, every new token's hidden state after the output norm
// (batch invariant as the logits are); Pool makes the L2-normalised vector
// of them, as llama.cpp's embedding does.
//
// Encoders (bert.go): "bert" and "nomic-bert" files, as llama.cpp's
// src/models/bert.cpp computes them. Token embedding + token type 0 (+
// learned absolute position for bert), LayerNorm (token_embd_norm); per
// layer Q/K/V with biases (nomic-bert: fused attn_qkv, NeoX RoPE on Q and
// K, no biases), bidirectional attention, output projection, residual,
// post-LayerNorm (attn_output_norm), GELU feed-forward with biases
// (nomic-bert: SwiGLU with ffn_gate), residual, post-LayerNorm
// (layer_output_norm); epsilon attention.layer_norm_epsilon; no output
// norm and no logits. The K/V of every layer go to the sequence's pages
// and are read back through the arena (tag-checked, as a decoder's), but
// every query reads all of its sequence's positions: AttentionWith
// (Bidirectional) over each whole sequence where the arena is a
// WindowAttender, else Attention with one span per query row, placed at
// the sequence's last position. So an input
// runs whole, in one Forward (Seq.Pos 0, Seq.Hidden; anything else is
// refused). LayerNorm, GELU and the rank head run on the host in float32
// rows with float64 sums: batch invariant, as every backend kernel used is.
// pooling_type 1 mean, 2 CLS (default) or 4 rank: a cross-encoder whose
// classification head (cls: tanh(W·h+b); cls.output: W·…+b, each optional,
// one required) scores the [CLS] row (Model.Rank, whose first value is the
// score; llama.cpp's rank pooling). Model.PoolHidden is the engine's entry:
// Rank for a rank model, Pool otherwise. TestEncoderMatchesReference checks
// every token's hidden state against a float64 reference read from the
// file (cosine ≥ 0.9999), TestEncoderBatchInvariant bit equality alone and
// batched.
//
// Decoder rerankers (rank.go): a qwen3 file with pooling_type 4 (rank)
// and cls.output.weight, as llama.cpp's converter writes Qwen3-Reranker
// (the lm_head rows of "yes" and "no"; one row per
// {arch}.classifier.output_labels entry). Rank reads the last row's hidden
// state after the output norm and gives the softmax of cls.output·h, as
// llama.cpp's build_pooling does for qwen3; the first output, P("yes"), is
// the score (RankProbability; an encoder's is the sigmoid of its logit).
// Rank pooling on any other decoder, or on a qwen3 file without
// cls.output, is PoolNone: llama.cpp reads the first token there, whose
// state under causal attention does not depend on the pair. cls, cls.bias
// or cls.output.bias beside a qwen3 head, or rows other than the labels',
// are refused. The head runs on the host in float64 per input: a score is
// batch invariant and the same whatever the prefill chunking
// (TestDecoderRankBatchInvariant). TestLlamaCppEncoders checks the scores
// against llama.cpp's ranking context (F32 2.4e-4, F16 6.3e-4 of the
// probability's logit; Q8_0 1.5e-2) and a last-token-pooling qwen3 file
// with add_eos_token (the tokens, EOS last, and the vector).
//
// T5 encoders (t5.go): "t5encoder" files and the encoder half of "t5"
// files (dec.* unread), as llama.cpp's src/models/t5.cpp encoder graph:
// token embedding; per layer RMSNorm (enc.blk.N.attn_norm, RMSEps), Q/K/V
// of Heads×HeadDim (attention.key_length) without biases, bidirectional
// attention with scale 1 (no 1/sqrt(d)) plus the relative-position bias
// attn_rel_b (RelBuckets buckets, max distance 128; layer 0's table
// where a layer has none) through the arena (kernels.AttentionOptions
// Bidirectional and Bias: the K/V go to the tenant's pages, tag-checked),
// attn_o, residual; RMSNorm (ffn_norm), GeGLU(ffn_gate, ffn_up) (flan-T5;
// needs kernels.GeGLUer) or ReLU(ffn_up) (T5), ffn_down, residual;
// enc.output_norm. pooling_type 1 mean, 2 CLS, 3 last, or none (no
// embeddings); rank is refused, as attention.causal true. The arena must
// be a kernels.WindowAttender (kernels/cpu), else Forward returns
// ErrUnsupported. TestT5EncoderMatchesReference checks every hidden state
// against a float64 reference (cosine ≥ 0.9999); TestLlamaCppEncoders the
// pooled vectors against llama.cpp's.
//
// Benchmarks: go test -run XXX -bench 'Prefill|Decode' -benchtime 5x
// ./engine/model — prefill and decode tokens/s at batch 1 and 16 for a 4-layer
// d=512 model (Q8_0, F32) and a ~100M model (Q8_0), and decode bandwidth
// efficiency = weight bytes streamed per second ÷ copy() bandwidth measured in
// the same run. make peer-quant compares logits per weight type with
// llama.cpp's. BenchmarkLoRADecode: 16 decoding sequences over 4 rank-16
// adapters against 16 without, as tokens/s and their ratio (0.92 on the
// Q8_0 model, 2 shared vCPUs; docs/benchmarks.md).
package model
