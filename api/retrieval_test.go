package api_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestRetrievalFlow: one node serves the three models of a retrieval flow —
// an embedding model (bert, mean pooling), a decoder reranker (qwen3,
// Qwen3-Reranker's layout) and a generator (the context bag) — and one
// tenant embeds the question and the documents, keeps the nearest by
// cosine, reranks them against the question, and asks the generator with
// the best one in the prompt, each step routed by its model field; the
// ledger has a request.completed per step naming that step's model, and
// none of the texts.
func TestRetrievalFlow(t *testing.T) {
	ggufBytes := func(w *gguf.Writer, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	embedder := ggufBytes(synth.Bert(synth.BertConfig{Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 512, DType: gguf.F32, Pooling: 1}))
	reranker := ggufBytes(synth.Random(*decoderReranker()))
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, EveryModel: true, Pages: 512,
		Models: []node.ModelFile{{Bytes: embedder, Name: "embedder"}, {Bytes: reranker, Name: "reranker"}}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	from := head(t, p)
	const q = "what is the capital of france"
	docs := []string{"paris is the capital of france", "the cat sat on the mat", "a river of water", "zebra quilt", "france is in europe"}

	// 1. Embed the question and the documents; keep the three nearest.
	in, _ := json.Marshal(append([]string{q}, docs...))
	vecs, _ := embed(t, p, tok, `{"model":"embedder","input":`+string(in)+`}`)
	if len(vecs) != len(docs)+1 {
		t.Fatalf("%d vectors", len(vecs))
	}
	dot := func(a, b []float32) float64 {
		var s float64
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	order := []int{0, 1, 2, 3, 4}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Compare(dot(vecs[0], vecs[1+j]), dot(vecs[0], vecs[1+i]))
	})
	var cands []string
	for _, i := range order[:3] {
		cands = append(cands, docs[i])
	}

	// 2. Rerank the candidates against the question.
	cj, _ := json.Marshal(cands)
	rr := rerankCall(t, p, tok, `{"model":"reranker","query":"`+q+`","documents":`+string(cj)+`,"top_n":1,"return_documents":true}`)
	if len(rr.Results) != 1 || rr.Results[0].Document == nil || rr.Model != "reranker" {
		t.Fatalf("rerank: %+v", rr)
	}
	best := rr.Results[0].Document.Text
	if s := rr.Results[0].RelevanceScore; !(s > 0 && s < 1) || math.IsNaN(float64(s)) {
		t.Fatalf("score %v", s)
	}

	// 3. Generate the answer from the best passage.
	msg, _ := json.Marshal("Answer from this passage: " + best + "\nQuestion: " + q)
	code, _, b := call(t, p, "POST", "/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":`+string(msg)+`}],"max_tokens":4}`)
	if code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}

	// The ledger: one request.completed per step, each naming its model.
	var models []string
	for _, r := range rows(t, p, from) {
		for _, s := range append(docs, q) {
			if strings.Contains(string(r.Payload), s) {
				t.Fatalf("ledger row %s holds text %q", r.Kind, s)
			}
		}
		if r.Kind != audit.KindRequestCompleted {
			continue
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := env.DecodePayload()
		if err != nil {
			t.Fatal(err)
		}
		rc := pl.(*audit.RequestCompleted)
		if rc.ModelDigest == nil {
			t.Fatalf("request.completed of %s without a model digest", rc.Model)
		}
		models = append(models, string(rc.Model))
	}
	if want := []string{"embedder", "reranker", platformtest.Model}; !slices.Equal(models, want) {
		t.Fatalf("request.completed models %v, want %v", models, want)
	}
}
