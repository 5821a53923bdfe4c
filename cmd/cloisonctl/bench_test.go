package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if rep.Path != cpu.Generic || !slices.Equal(rep.Paths, cpu.Paths()) || rep.CPU == "" {
		t.Fatalf("report header %+v", rep)
	}
	if len(rep.Results) != 8 {
		t.Fatalf("got %d results, want 8", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.PrefillTokS <= 0 || r.DecodeTokS <= 0 || r.DecodeSteps != 4 {
			t.Fatalf("result %+v", r)
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
// qwen3 with its per-head Q/K norm and the head width asked for; an unknown
// architecture is refused.
func TestModelSynthQwen3(t *testing.T) {
	model := filepath.Join(t.TempDir(), "q.gguf")
	mustRun(t, "model", "synth", "--arch", "qwen3", "--layers", "1", "--d-model", "64", "--heads", "4", "--kv-heads", "2",
		"--head-dim", "32", "--ffn", "128", "--vocab", "300", "--context", "256", model)
	out := mustRun(t, "model", "inspect", model)
	for _, want := range []string{"architecture     qwen3", "head_dim         32", "qk_norm          true"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "model", "synth", "--arch", "gemma3", filepath.Join(t.TempDir(), "g.gguf")); err == nil {
		t.Error("--arch gemma3 accepted")
	}
}
