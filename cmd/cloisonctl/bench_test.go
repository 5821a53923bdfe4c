package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// TestBenchCommand: bench on a synthesized model reports every (threads,
// prompt, batch) point with positive rates and the path it ran, honours
// --path, and refuses bad flags before loading anything.
func TestBenchCommand(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m.gguf")
	mustRun(t, "model", "synth", "--layers", "1", "--d-model", "64", "--heads", "2", "--kv-heads", "1", "--ffn", "128", "--vocab", "300", "--context", "256", model)
	out := mustRun(t, "bench", model, "--prompt", "8,20", "--batch", "1,3", "--threads", "1,2", "--decode", "4", "--reps", "1", "--json", "--path", "generic")
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Path != cpu.Generic || !slices.Equal(rep.Paths, cpu.Paths()) || rep.CPU == "" || rep.KVType != "f32" {
		t.Fatalf("report header %+v", rep)
	}
	if len(rep.Results) != 8 {
		t.Fatalf("got %d results, want 8", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.PrefillTokS <= 0 || r.DecodeTokS <= 0 || r.DecodeSteps != 4 {
			t.Fatalf("result %+v", r)
		}
		if runtime.GOOS == "linux" && r.DecodeTokCPU <= 0 {
			t.Fatalf("no decode tok/cpu-s on linux: %+v", r)
		}
	}
	for _, r := range rep.Results {
		if r.Logits != nil {
			t.Fatal("logits reported without --logits")
		}
	}
	// --logits: sequence 0's logits after the prefill, the same whatever
	// the thread count and batch (batch invariance) on a path.
	var lr benchReport
	if err := json.Unmarshal([]byte(mustRun(t, "bench", model, "--prompt", "20", "--batch", "1,3", "--threads", "1,2", "--decode", "0", "--reps", "1", "--json", "--logits")), &lr); err != nil {
		t.Fatal(err)
	}
	for _, r := range lr.Results {
		if len(r.Logits) != 300 || !slices.Equal(r.Logits, lr.Results[0].Logits) {
			t.Fatalf("point %d/%d/%d: %d logits, equal to the first point's: %v", r.Threads, r.Prompt, r.Batch, len(r.Logits), slices.Equal(r.Logits, lr.Results[0].Logits))
		}
	}
	if slices.Max(lr.Results[0].Logits) == slices.Min(lr.Results[0].Logits) {
		t.Fatal("constant logits")
	}
	// --kv-type f16: an f16 arena, reported; its logits differ from f32's
	// (K and V rounded to half) but only slightly.
	var hr benchReport
	if err := json.Unmarshal([]byte(mustRun(t, "bench", model, "--prompt", "20", "--decode", "2", "--reps", "1", "--json", "--logits", "--kv-type", "F16")), &hr); err != nil {
		t.Fatal(err)
	}
	if hr.KVType != "f16" || len(hr.Results) != 1 || len(hr.Results[0].Logits) != 300 {
		t.Fatalf("f16 report %+v", hr)
	}
	if slices.Equal(hr.Results[0].Logits, lr.Results[0].Logits) {
		t.Error("f16 KV logits bit-identical to f32 KV's: the f16 arena was not used")
	}
	for i, v := range hr.Results[0].Logits {
		if d := math.Abs(float64(v - lr.Results[0].Logits[i])); d > 0.05 {
			t.Fatalf("logit %d: f16 KV %v, f32 KV %v", i, v, lr.Results[0].Logits[i])
		}
	}
	text := mustRun(t, "bench", model, "--prompt", "8", "--decode", "0", "--reps", "1")
	if !strings.Contains(text, "prefill tok/s") || !strings.Contains(text, "path "+string(cpu.Paths()[len(cpu.Paths())-1])) {
		t.Fatalf("text output:\n%s", text)
	}
	for _, args := range [][]string{
		{"--prompt", "0"},
		{"--batch", "-1"},
		{"--threads", "0"},
		{"--decode", "-1"},
		{"--reps", "0"},
		{"--path", "neon"},
		{"--kv-type", "q8_0"},
		{"--prompt", "250", "--decode", "10"}, // past the context of 256
	} {
		if _, err := run(t, append([]string{"bench", model}, args...)...); err == nil {
			t.Errorf("bench %v: no error", args)
		}
	}
	if _, err := run(t, "bench", filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("bench of a missing file: no error")
	}
}

// TestModelSynthQwen3: `model synth --arch qwen3` writes a file that loads as
// qwen3 with its per-head Q/K norm and the head width asked for (with
// --pooling 4, a decoder reranker); an unknown architecture is refused.
func TestModelSynthQwen3(t *testing.T) {
	model := filepath.Join(t.TempDir(), "q.gguf")
	mustRun(t, "model", "synth", "--arch", "qwen3", "--layers", "1", "--d-model", "64", "--heads", "4", "--kv-heads", "2",
		"--head-dim", "32", "--ffn", "128", "--vocab", "300", "--context", "256", model)
	out := mustRun(t, "model", "inspect", model)
	for _, want := range []string{"architecture     qwen3", "head_dim         32", "qk_norm          true", "vocab 300"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "model", "synth", "--arch", "gemma2", filepath.Join(t.TempDir(), "g.gguf")); err == nil {
		t.Error("--arch gemma2 accepted")
	}
	// --pooling 4 makes a qwen3 file a decoder reranker (rank pooling, a
	// yes/no head); on llama, whose rank pooling reads the first token,
	// the key is written but the file serves no ranking.
	for _, tc := range []struct{ arch, want string }{{"qwen3", "pooling rank"}, {"llama", "pooling none"}} {
		f := filepath.Join(t.TempDir(), tc.arch+"-rank.gguf")
		mustRun(t, "model", "synth", "--arch", tc.arch, "--pooling", "4", "--layers", "1", "--d-model", "64", "--heads", "4", "--kv-heads", "2",
			"--head-dim", "32", "--ffn", "128", "--vocab", "300", "--context", "256", f)
		if out := strings.Join(strings.Fields(mustRun(t, "model", "inspect", f)), " "); !strings.Contains(out, tc.want) {
			t.Errorf("%s --pooling 4: inspect lacks %q:\n%s", tc.arch, tc.want, out)
		}
	}
}

// TestModelSynthArchs: `model synth --arch gemma3|phi3|granite` writes files
// that load as that architecture; gemma3 with --window has five local layers
// of six.
func TestModelSynthArchs(t *testing.T) {
	for _, tc := range []struct {
		arch  string
		extra []string
		want  []string
	}{
		{"gemma3", []string{"--window", "8", "--layers", "6"}, []string{"qk_norm true", "sliding_window 8", "local_layers 5"}},
		{"phi3", []string{"--layers", "1"}, []string{"sliding_window 0"}},
		{"granite", []string{"--layers", "1", "--logit-scale", "8"}, []string{"qk_norm false"}},
	} {
		model := filepath.Join(t.TempDir(), tc.arch+".gguf")
		mustRun(t, append([]string{"model", "synth", "--arch", tc.arch, "--d-model", "64", "--heads", "4", "--kv-heads", "2",
			"--ffn", "128", "--vocab", "300", "--context", "256", "--dtype", "f32", model}, tc.extra...)...)
		out := strings.Join(strings.Fields(mustRun(t, "model", "inspect", model)), " ")
		for _, want := range append(tc.want, "architecture "+tc.arch) {
			if !strings.Contains(out, want) {
				t.Errorf("%s: inspect output lacks %q:\n%s", tc.arch, want, out)
			}
		}
	}
}

// TestModelSynthMoE: `model synth --arch qwen3moe|mixtral --experts N` writes
// files that load with N experts (mixtral as a llama file), in the new
// weight types too; experts on a dense architecture are refused.
func TestModelSynthMoE(t *testing.T) {
	for _, tc := range []struct{ arch, dtype, wantArch string }{{"qwen3moe", "mxfp4", "qwen3moe"}, {"mixtral", "q3_k", "llama"}} {
		model := filepath.Join(t.TempDir(), tc.arch+".gguf")
		mustRun(t, "model", "synth", "--arch", tc.arch, "--experts", "4", "--layers", "1", "--d-model", "256", "--heads", "4", "--kv-heads", "2",
			"--ffn", "256", "--vocab", "300", "--context", "256", "--dtype", tc.dtype, model)
		out := strings.Join(strings.Fields(mustRun(t, "model", "inspect", model)), " ")
		for _, want := range []string{"architecture " + tc.wantArch, "experts 4", "experts_used 2"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: inspect output lacks %q:\n%s", tc.arch, want, out)
			}
		}
	}
	if _, err := run(t, "model", "synth", "--arch", "llama", "--experts", "4", filepath.Join(t.TempDir(), "l.gguf")); err == nil {
		t.Error("--experts with --arch llama accepted")
	}
}

// TestModelSynthChatTemplate: --chat-template replaces the ChatML template
// in the file (make sdk-test serves a tool-calling template this way).
func TestModelSynthChatTemplate(t *testing.T) {
	dir := t.TempDir()
	tpl := filepath.Join(dir, "t.jinja")
	const src = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	if err := os.WriteFile(tpl, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "b.gguf")
	mustRun(t, "model", "synth", "--bag", "--chat-template", tpl, model)
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := f.String("tokenizer.chat_template"); got != src {
		t.Fatalf("got template %q, want %q", got, src)
	}
	if _, err := run(t, "model", "synth", "--bag", "--chat-template", filepath.Join(dir, "missing"), filepath.Join(dir, "c.gguf")); err == nil {
		t.Error("a missing template file accepted")
	}
}

// TestModelSynthLoRA: `model synth --lora BASE.gguf` writes a LoRA adapter
// in llama.cpp's format that loads for that base and is refused, by
// tensor name, for a base of another shape.
func TestModelSynthLoRA(t *testing.T) {
	dir := t.TempDir()
	base, other, ad := filepath.Join(dir, "base.gguf"), filepath.Join(dir, "other.gguf"), filepath.Join(dir, "ad.gguf")
	shape := []string{"--layers", "1", "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--vocab", "300", "--context", "256", "--dtype", "f32"}
	mustRun(t, append(append([]string{"model", "synth", "--d-model", "64"}, shape...), base)...)
	mustRun(t, append(append([]string{"model", "synth", "--d-model", "128"}, shape...), other)...)
	mustRun(t, "model", "synth", "--lora", base, "--rank", "8", "--targets", "attn_q,ffn_down", "--seed", "3", ad)
	data, err := os.ReadFile(ad)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if ty, _ := f.String("general.type"); ty != "adapter" {
		t.Fatalf("general.type %q", ty)
	}
	if n := len(f.Tensors); n != 4 {
		t.Fatalf("%d tensors, want 4 (two pairs)", n)
	}
	b, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		base string
		ok   bool
	}{{base, true}, {other, false}} {
		bf, err := gguf.Open(tc.base)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(b, bf)
		if err != nil {
			t.Fatal(err)
		}
		a, err := model.LoadAdapter(m, data)
		switch {
		case tc.ok && (err != nil || a.Rank != 8 || a.Tensors != 2):
			t.Fatalf("%s: %+v, %v", tc.base, a, err)
		case !tc.ok && (!errors.Is(err, model.ErrAdapter) || !strings.Contains(err.Error(), "blk.0.attn_q.weight")):
			t.Fatalf("%s: got %v, want ErrAdapter naming blk.0.attn_q.weight", tc.base, err)
		}
		m.Close()
		bf.Close()
	}
	out := mustRun(t, "model", "inspect", ad)
	for _, want := range []string{"adapter", "llama", "2×8", fmt.Sprintf("sha256:%x", sha256.Sum256(data))} {
		if !strings.Contains(out, want) {
			t.Errorf("model inspect of the adapter does not say %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "model", "synth", "--lora", base, "--bag", filepath.Join(dir, "x.gguf")); err == nil {
		t.Error("--lora with --bag accepted")
	}
}

// TestBenchEmbedCommand: bench embed computes the number of embeddings
// asked at every thread count, from pseudo-random ids or from a text file
// whose lines tokenize to the length checked (bert: [CLS] words [SEP]),
// and refuses bad flags, a text file that disagrees with --inputs or
// --tokens, and a decoder model.
func TestBenchEmbedCommand(t *testing.T) {
	dir := t.TempDir()
	enc := filepath.Join(dir, "bert.gguf")
	mustRun(t, "model", "synth", "--arch", "bert", "--layers", "1", "--d-model", "64", "--heads", "2", "--ffn", "128", "--context", "64", "--pooling", "1", "--dtype", "q8_0", enc)
	var rep embedReport
	if err := json.Unmarshal([]byte(mustRun(t, "bench", "embed", enc, "--inputs", "5", "--tokens", "24", "--threads", "1,2", "--reps", "2", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Arch != "bert" || rep.Inputs != 5 || rep.Tokens != 24 || rep.Text || rep.Reps != 2 || rep.CPU == "" || len(rep.Results) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for i, r := range rep.Results {
		if r.Threads != i+1 || r.Embeddings != 5 || r.EmbeddingsS <= 0 || r.Milli <= 0 {
			t.Fatalf("result %+v", r)
		}
		if runtime.GOOS == "linux" && r.EmbeddingsCPU <= 0 {
			t.Fatalf("no embeddings/cpu-s on linux: %+v", r)
		}
	}
	// Three lines of 6 whole words: 8 tokens each with [CLS] and [SEP];
	// blank lines are not inputs.
	text := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(text, []byte("the cat sat on the mat\n\nhello world of the tenant vector\r\nparis is the capital of france\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var tr embedReport
	if err := json.Unmarshal([]byte(mustRun(t, "bench", "embed", enc, "--text", text, "--tokens", "8", "--inputs", "3", "--reps", "1", "--json")), &tr); err != nil {
		t.Fatal(err)
	}
	if !tr.Text || tr.Inputs != 3 || tr.Tokens != 8 || len(tr.Results) != 1 || tr.Results[0].Embeddings != 3 {
		t.Fatalf("text report %+v", tr)
	}
	out := mustRun(t, "bench", "embed", enc, "--text", text, "--reps", "1")
	if !strings.Contains(out, "3 inputs of 8 tokens") || !strings.Contains(out, "embeddings/s") {
		t.Fatalf("text output:\n%s", out)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dec := filepath.Join(dir, "dec.gguf")
	mustRun(t, "model", "synth", "--layers", "1", "--d-model", "64", "--heads", "2", "--kv-heads", "1", "--ffn", "128", "--vocab", "300", "--context", "64", dec)
	for _, args := range [][]string{
		{enc, "--inputs", "0"},
		{enc, "--inputs", "5000"},
		{enc, "--tokens", "0"},
		{enc, "--tokens", "65"}, // past the context of 64
		{enc, "--threads", "0"},
		{enc, "--reps", "0"},
		{enc, "--path", "neon"},
		{enc, "--text", text, "--tokens", "9"},
		{enc, "--text", text, "--inputs", "4"},
		{enc, "--text", filepath.Join(dir, "missing.txt")},
		{enc, "--text", empty},
		{dec, "--inputs", "2", "--tokens", "8"},
		{filepath.Join(dir, "missing.gguf")},
	} {
		if _, err := run(t, append([]string{"bench", "embed"}, args...)...); err == nil {
			t.Errorf("bench embed %v: no error", args)
		}
	}
}
