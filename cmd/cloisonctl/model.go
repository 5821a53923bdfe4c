package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
)

func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Synthesize and inspect GGUF models"}
	cmd.AddCommand(newModelSynthCmd(), newModelInspectCmd())
	cmd.AddCommand(newModelServedCmds()...) // model_admin.go: a running node's models
	return cmd
}

// newModelSynthCmd is model synth: a synthetic model written to a file.
func newModelSynthCmd() *cobra.Command {
	var c synth.Config
	var bag, fim bool
	var pooling int
	var dtype, chatTemplate string
	var relu bool
	var lora, loraTargets, loraDType string
	var lc synth.LoRAConfig
	synthCmd := &cobra.Command{
		Use:   "synth OUT.gguf",
		Short: "Write a synthetic model: seeded random llama, qwen3, qwen3moe, mixtral, gemma3, phi3, granite, bert, nomic-bert or t5encoder weights, or the context-bag leak oracle (--bag)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var w *gguf.Writer
			var err error
			if lora != "" {
				if bag || fim || chatTemplate != "" || pooling != 0 {
					return fmt.Errorf("--lora writes an adapter: --bag, --fim, --chat-template and --pooling are for models")
				}
				switch loraDType {
				case "f32":
					lc.DType = gguf.F32
				case "f16":
					lc.DType = gguf.F16
				default:
					return fmt.Errorf("--lora-dtype %q: f32 or f16", loraDType)
				}
				if loraTargets != "" {
					lc.Targets = nil
					for _, t := range strings.Split(loraTargets, ",") {
						lc.Targets = append(lc.Targets, strings.TrimSpace(t)+".weight")
					}
				}
				lc.Seed = c.Seed
				base, err := gguf.Open(lora)
				if err != nil {
					return err
				}
				defer base.Close()
				if w, err = synth.LoRA(base, lc); err != nil {
					return err
				}
			} else if bag {
				w, err = synth.ContextBag(synth.BagConfig{Vocab: c.Vocab, Context: c.Context, FIM: fim, Pooling: pooling})
			} else if c.Arch == "bert" || c.Arch == "nomic-bert" || c.Arch == "t5encoder" {
				// An encoder: its vocabulary is synth.BertVocab (WordPiece)
				// or synth.T5Vocab (Unigram); --vocab and --kv-heads do not
				// apply, --head-dim and --relu are t5encoder's.
				if err := setDType(&c, dtype); err != nil {
					return err
				}
				bc := synth.BertConfig{Arch: c.Arch, Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, FFN: c.FFN,
					Context: c.Context, Pooling: pooling, DType: c.DType, Seed: c.Seed, ReLU: relu}
				if c.Arch == "t5encoder" {
					bc.KeyLength = c.HeadDim
				}
				w, err = synth.Bert(bc)
			} else if fim {
				return fmt.Errorf("--fim is for the context-bag model (--bag)")
			} else {
				if err := setDType(&c, dtype); err != nil {
					return err
				}
				if w, err = synth.Random(c); err == nil && pooling != 0 {
					err = w.Set(c.Arch+".pooling_type", uint32(pooling))
				}
			}
			if err != nil {
				return err
			}
			if chatTemplate != "" {
				src, err := os.ReadFile(chatTemplate)
				if err != nil {
					return err
				}
				if err := w.Set("tokenizer.chat_template", string(src)); err != nil {
					return err
				}
			}
			if err := w.WriteFile(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", args[0])
			return nil
		},
	}
	f := synthCmd.Flags()
	f.StringVar(&chatTemplate, "chat-template", "", "a Jinja chat template file written as tokenizer.chat_template instead of ChatML (its special tokens must be the synthetic vocabulary's: ChatML-family templates)")
	f.BoolVar(&bag, "bag", false, "the context-bag model (emits only tokens of the KV it reads)")
	f.BoolVar(&fim, "fim", false, "with --bag: end the vocabulary with fill-in-the-middle tokens (a model that allows completions' suffix)")
	f.IntVar(&pooling, "pooling", 0, "{arch}.pooling_type: 1 mean, 2 CLS, 3 last (an embedding model, served by /v1/embeddings); 4 rank (bert, nomic-bert: a cross-encoder with a classification head, served by /v1/rerank and /v1/score); 0: none (bert, nomic-bert: CLS; t5encoder: mean)")
	f.BoolVar(&relu, "relu", false, "t5encoder: T5's ReLU feed-forward instead of flan-T5's gated GELU")
	f.IntVar(&c.Layers, "layers", 4, "layers")
	f.IntVar(&c.DModel, "d-model", 512, "embedding width")
	f.IntVar(&c.Heads, "heads", 8, "attention heads")
	f.IntVar(&c.KVHeads, "kv-heads", 4, "KV heads")
	f.IntVar(&c.HeadDim, "head-dim", 0, "head width (0: d-model/heads)")
	f.StringVar(&c.Arch, "arch", "llama", "architecture: llama, qwen3 (per-head Q/K norm), qwen3moe or mixtral (mixtures of experts; need --experts), gemma3, phi3, granite, or the encoders bert and nomic-bert (WordPiece vocabulary) and t5encoder (Unigram vocabulary; relative position bias) with --dtype f32, f16 or q8_0")
	f.IntVar(&c.Experts, "experts", 0, "experts per layer (qwen3moe, mixtral); --ffn is each expert's width")
	f.IntVar(&c.ExpertsUsed, "experts-used", 0, "experts routed per token (with --experts; 0: 2)")
	f.IntVar(&c.Window, "window", 0, "attention.sliding_window (0: none; gemma3: five local layers, then a global one; others: every layer)")
	f.Float32Var(&c.FinalSoftcap, "final-softcap", 0, "final_logit_softcapping (0: none)")
	f.Float32Var(&c.LogitScale, "logit-scale", 0, "granite.logit_scale (0: 1)")
	f.IntVar(&c.FFN, "ffn", 1408, "feed-forward width")
	f.IntVar(&c.Vocab, "vocab", 2048, "vocabulary (≥ 259)")
	f.IntVar(&c.Context, "context", 4096, "advertised context length")
	f.Uint64Var(&c.Seed, "seed", 1, "weight seed")
	f.StringVar(&dtype, "dtype", "q8_0", "weights: f32, f16, bf16, q8_0, q4_1, q5_0, q5_1, mxfp4, q2_k, q3_k, q4_k, q5_k, q6_k (the k-quants: d-model and ffn multiples of 256), or the q4_k_m / q5_k_m mixes")
	// LoRA adapters (--lora BASE.gguf): the flags below.
	f.StringVar(&lora, "lora", "", "write a LoRA adapter (llama.cpp's GGUF adapter format) for this base model file instead of a model; --seed seeds it")
	f.IntVar(&lc.Rank, "rank", 16, "with --lora: the rank of every pair")
	f.Float32Var(&lc.Alpha, "alpha", 0, "with --lora: adapter.lora.alpha (0: 2·rank)")
	f.Float64Var(&lc.Strength, "strength", 0.25, "with --lora: the size of the adapted products' change relative to the base products'")
	f.StringVar(&loraTargets, "targets", "", "with --lora: the adapted projections, comma-separated (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down; empty: all)")
	f.BoolVar(&lc.Output, "lora-output", false, "with --lora: adapt output.weight too")
	f.StringVar(&loraDType, "lora-dtype", "f32", "with --lora: f32 or f16 pairs")
	f.StringVar(&lc.Name, "lora-name", "", "with --lora: general.name (default synthetic-lora)")
	return synthCmd
}

// newModelInspectCmd is model inspect: a GGUF file's hyperparameters.
func newModelInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect MODEL.gguf",
		Short: "Print a GGUF file's architecture and hyperparameters (a LoRA adapter's: architecture, alpha, ranks, pairs, digest)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			if ty, _ := f.String("general.type"); ty == "adapter" {
				return inspectAdapter(cmd, args[0], f)
			}
			mc, err := model.ConfigFromGGUF(f)
			if err != nil {
				return err
			}
			name, _ := f.String("general.name")
			if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Dims) == 2 && mc.Vocab == 0 {
				mc.Vocab = int(emb.Dims[1]) // the rows of the embedding, as the loader counts them
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, kv := range [][2]any{{"name", name}, {"architecture", mc.Arch}, {"layers", mc.Layers}, {"d_model", mc.DModel},
				{"heads", mc.Heads}, {"kv_heads", mc.KVHeads}, {"head_dim", mc.HeadDim}, {"ffn", mc.FFN}, {"vocab", mc.Vocab},
				{"context", mc.Context}, {"rms_eps", mc.RMSEps}, {"rope_base", mc.RoPE.Base}, {"tied_embeddings", mc.Tied}, {"qk_norm", mc.QKNorm},
				{"experts", mc.Experts}, {"experts_used", mc.ExpertsUsed}, {"sliding_window", mc.Window}, {"local_layers", localLayers(mc.SWA)},
				{"pooling", mc.Pooling}} {
				fmt.Fprintf(w, "%v\t%v\n", kv[0], kv[1])
			}
			if mc.Encoder {
				fmt.Fprintf(w, "encoder\ttrue\n")
			}
			if mc.NormEps != 0 {
				fmt.Fprintf(w, "norm_eps\t%v\n", mc.NormEps)
			}
			if mc.RelBuckets > 0 {
				fmt.Fprintf(w, "relative_buckets\t%d\n", mc.RelBuckets)
			}
			return w.Flush()
		},
	}
}

// setDType sets c's weight type (and k-quant mix) from --dtype.
func setDType(c *synth.Config, dtype string) error {
	switch dtype {
	case "f32":
		c.DType = gguf.F32
	case "f16":
		c.DType = gguf.F16
	case "bf16":
		c.DType = gguf.BF16
	case "q8_0":
		c.DType = gguf.Q8_0
	case "q4_1":
		c.DType = gguf.Q4_1
	case "q5_0":
		c.DType = gguf.Q5_0
	case "q5_1":
		c.DType = gguf.Q5_1
	case "q2_k":
		c.DType = gguf.Q2_K
	case "q3_k":
		c.DType = gguf.Q3_K
	case "mxfp4":
		c.DType = gguf.MXFP4
	case "q4_k", "q4_k_m":
		c.DType, c.KQuantMix = gguf.Q4_K, dtype == "q4_k_m"
	case "q5_k", "q5_k_m":
		c.DType, c.KQuantMix = gguf.Q5_K, dtype == "q5_k_m"
	case "q6_k":
		c.DType = gguf.Q6_K
	default:
		return fmt.Errorf("dtype %q: want f32, f16, bf16, q8_0, q4_1, q5_0, q5_1, mxfp4, q2_k, q3_k, q4_k, q4_k_m, q5_k, q5_k_m or q6_k", dtype)
	}
	return nil
}

// localLayers counts the sliding-window layers.
func localLayers(swa []bool) int {
	n := 0
	for _, b := range swa {
		if b {
			n++
		}
	}
	return n
}

// inspectAdapter prints a LoRA adapter file's keys, its pairs' ranks and
// its digest (the SHA-256 of the file, as model.LoadAdapter computes it).
func inspectAdapter(cmd *cobra.Command, path string, f *gguf.File) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name, _ := f.String("general.name")
	arch, _ := f.String("general.architecture")
	kind, _ := f.String("adapter.type")
	alpha, _ := f.Float("adapter.lora.alpha")
	ranks := map[uint64]int{}
	pairs := 0
	for _, t := range f.Tensors {
		if strings.HasSuffix(t.Name, ".lora_a") && len(t.Dims) == 2 {
			ranks[t.Dims[1]]++
			pairs++
		}
	}
	var rs []string
	for r, n := range ranks {
		rs = append(rs, fmt.Sprintf("%d×%d", n, r))
	}
	slices.Sort(rs)
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	for _, kv := range [][2]any{{"name", name}, {"type", "adapter"}, {"adapter_type", kind}, {"architecture", arch}, {"alpha", alpha},
		{"pairs", pairs}, {"ranks", strings.Join(rs, " ")}, {"digest", fmt.Sprintf("sha256:%x", sha256.Sum256(data))}} {
		fmt.Fprintf(w, "%v\t%v\n", kv[0], kv[1])
	}
	return w.Flush()
}
