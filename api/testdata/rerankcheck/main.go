// Command rerankcheck records llama.cpp's own /v1/rerank scores (its
// llama-server, built by make llama-native, started with --reranking) on a
// synthetic qwen3 decoder reranker (synth.Config.Rerank) for text pairs,
// into api/testdata/llamaserver_rerank.json, the oracle of
// TestLlamaServerRerank: the whole path — the rerank template filled and
// tokenized, the last token's state, the yes/no head and its softmax —
// against ours (our /v1/rerank on the same file). make rerank-check runs
// it.
//
//	go run ./service/testdata/rerankcheck [-server PATH] OUT.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// Record is the file: the model's config, llama-server's flags and
// version, and per case the query, the documents and their scores.
type Record struct {
	Server string       `json:"llama_server"`
	Flags  []string     `json:"flags"`
	Config synth.Config `json:"config"`
	Cases  []Case       `json:"cases"`
}

// Case is one /v1/rerank request and llama-server's answer: a score per
// document (relevance_score, in the documents' order) and the prompt
// tokens it counted.
type Case struct {
	Query     string    `json:"query"`
	Documents []string  `json:"documents"`
	Scores    []float64 `json:"scores"`
	Tokens    int       `json:"prompt_tokens"`
}

func main() {
	server := flag.String("server", "", "llama-server (default: .cache/llama-native/*/build/bin/llama-server)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: rerankcheck [-server PATH] OUT.json")
		os.Exit(2)
	}
	if *server == "" {
		m, _ := filepath.Glob(".cache/llama-native/*/build/bin/llama-server")
		if len(m) == 0 {
			fail(fmt.Errorf("no llama-server: run make llama-native, or pass -server"))
		}
		*server = m[0]
	}
	cfg := synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512,
		Context: 1024, DType: gguf.F32, Seed: 8, Rerank: true}
	w, err := synth.Random(cfg)
	if err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "rerankcheck")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "reranker.gguf")
	if err := w.WriteFile(file); err != nil {
		fail(err)
	}
	version, err := exec.Command(*server, "--version").CombinedOutput()
	if err != nil {
		fail(err)
	}
	port, err := freePort()
	if err != nil {
		fail(err)
	}
	// CPU, one thread, F32 KV, no flash attention: as the node-llama-cpp
	// oracles run llama.cpp.
	flags := []string{"--reranking", "-c", "1024", "-b", "1024", "-ub", "1024", "-t", "1", "-ctk", "f32", "-ctv", "f32", "-fa", "off", "-np", "1"}
	cmd := exec.Command(*server, append([]string{"-m", file, "--host", "127.0.0.1", "--port", fmt.Sprint(port)}, flags...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHealthy(base); err != nil {
		fail(fmt.Errorf("%v\n%s", err, log.String()))
	}
	rec := Record{Flags: flags, Config: cfg}
	for _, l := range strings.Split(string(version), "\n") {
		if strings.HasPrefix(l, "version:") {
			rec.Server = strings.TrimSpace(l)
		}
	}
	for _, c := range []Case{
		{Query: "what is the capital of france", Documents: []string{"paris is the capital and largest city of france", "the quick brown fox jumps over the lazy dog", "france"}},
		{Query: "how do bees make honey", Documents: []string{"bees collect nectar from flowers and store it in the hive", "honey", "Bees, Nectar & Honey: 42 facts!"}},
		{Query: "a", Documents: []string{"b", "a"}},
	} {
		if err := rerank(base, &c); err != nil {
			fail(fmt.Errorf("%v\n%s", err, log.String()))
		}
		rec.Cases = append(rec.Cases, c)
	}
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(flag.Arg(0), append(b, '\n'), 0o644); err != nil {
		fail(err)
	}
}

func rerank(base string, c *Case) error {
	body, _ := json.Marshal(map[string]any{"query": c.Query, "documents": c.Documents})
	resp, err := http.Post(base+"/v1/rerank", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
		Results []struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Results) != len(c.Documents) {
		return fmt.Errorf("rerank: status %d, %d results, %v", resp.StatusCode, len(out.Results), err)
	}
	c.Scores = make([]float64, len(c.Documents))
	for _, r := range out.Results {
		c.Scores[r.Index] = r.Score
	}
	c.Tokens = out.Usage.PromptTokens
	return nil
}

func waitHealthy(base string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("llama-server not healthy after a minute")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rerankcheck:", err)
	os.Exit(1)
}
