package model

import (
	"crypto/sha256"
	"math"

	"fmt"
	"strconv"
	"strings"

	"github.com/cloison/cloison"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// The projections a LoRA adapter may adapt, per layer, in the order Forward
// applies them.
const (
	loraQ = iota
	loraK
	loraV
	loraO
	loraGate
	loraUp
	loraDown
	loraN
)

// loraNames are the base tensors (blk.N.<name>) of the per-layer projections.
var loraNames = [loraN]string{"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}

// loraBackends are the backends mixed-adapter batches were checked on.
var loraBackends = map[string]bool{"cpu": true}

// loraPair is one adapted projection: W·x + Scale·B·(A·x), A Rank×in,
// B out×Rank.
type loraPair struct {
	a, b  kernels.Matrix
	bt    kernels.Tensor // Bᵀ (Rank×out, float32) on a kernels.LowRankAdder; nil otherwise
	rank  int
	scale float32
}

// Adapter is a LoRA adapter loaded for one base Model (LoadAdapter). It is
// immutable and safe to share between sequences and batches; a Seq names it
// to have its rows adapted.
type Adapter struct {
	// Name is general.name ("" when absent).
	Name string
	// Digest is the SHA-256 of the adapter file's bytes: what the prefix
	// cache key, attestations and records name.
	Digest [32]byte
	// Alpha is adapter.lora.alpha (0 when absent: scale 1, as llama.cpp).
	Alpha float32
	// Rank is the largest rank of its tensor pairs.
	Rank int
	// Tensors is the number of adapted base tensors.
	Tensors int

	base   *Model
	data   []byte // the file's bytes: the backend's matrices may alias them
	layers [][loraN]*loraPair
	output *loraPair
	bytes  int64
	owned  []kernels.Tensor // freed by Close
}

// Close frees the adapter's backend tensors. No batch may use the adapter
// afterwards: an engine closes it only once every request that names it
// has finished. Dropping the last reference without Close is enough on
// the cpu backend, whose tensors the garbage collector frees.
func (ad *Adapter) Close() {
	for _, t := range ad.owned {
		ad.base.b.Free(t)
	}
	ad.owned = nil
}

// Bytes returns the size of the adapter's weights (what one decode step of
// an adapted sequence reads beyond the base's).
func (ad *Adapter) Bytes() int64 { return ad.bytes }

// Base returns the model the adapter was loaded for.
func (ad *Adapter) Base() *Model { return ad.base }

// ErrAdapter: a LoRA adapter file that is not one, or that does not fit the
// base model (code invalid_request_error). Each error names the tensor or
// key at fault.
var ErrAdapter = cloison.NewError(cloison.CodeInvalid, "model: invalid LoRA adapter")

// LoadAdapter loads the GGUF LoRA adapter held in data (the whole file, as
// llama.cpp's convert_lora_to_gguf.py writes it) for base: general.type
// "adapter", adapter.type "lora", general.architecture the base's,
// adapter.lora.alpha (optional), and for each adapted base tensor T the
// pair T.lora_a (ggml dims [in, rank]) and T.lora_b ([rank, out]), checked
// against T's shape as llama.cpp's llama_adapter_lora_init does. data must
// not be modified afterwards (the backend may alias it).
//
// Adapted tensors: every layer's attn_q, attn_k, attn_v, attn_output,
// ffn_gate, ffn_up and ffn_down weights, and output.weight of a model
// with its own output projection. A pair for another tensor of the base
// (token_embd, fused attn_qkv or phi3's fused ffn_up, expert stacks, norms)
// is refused with ErrUnsupported, a name absent from the base with
// ErrAdapter.
//
// Errors: ErrAdapter (not an adapter, wrong architecture, a lone or
// misshapen pair, a tensor the base lacks, no pair at all), ErrUnsupported
// (a tensor Forward does not adapt, a backend other than cpu, a weight
// type the backend lacks), gguf.ErrFormat (not a GGUF file).
func LoadAdapter(base *Model, data []byte) (*Adapter, error) {
	if !loraBackends[base.b.Name()] {
		return nil, fmt.Errorf("%w: LoRA adapters on backend %q (verified on: cpu)", ErrUnsupported, base.b.Name())
	}
	_, scaler := base.b.(kernels.Scaler)
	_, expand := base.b.(kernels.LowRankAdder)
	if !scaler && !expand {
		return nil, fmt.Errorf("%w: LoRA adapters need scaled activations, which backend %s lacks", ErrUnsupported, base.b.Name())
	}
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, err
	}
	if t, _ := f.String("general.type"); t != "adapter" {
		return nil, fmt.Errorf("%w: general.type is %q, want \"adapter\"", ErrAdapter, t)
	}
	if t, _ := f.String("adapter.type"); t != "lora" {
		return nil, fmt.Errorf("%w: adapter.type is %q, want \"lora\"", ErrAdapter, t)
	}
	if a, _ := f.String("general.architecture"); a != base.Arch {
		return nil, fmt.Errorf("%w: general.architecture is %q, the base model's %q", ErrAdapter, a, base.Arch)
	}
	if _, ok := f.Get("adapter.alora.invocation_tokens"); ok {
		return nil, fmt.Errorf("%w: activated LoRA (adapter.alora.invocation_tokens)", ErrUnsupported)
	}
	ad := &Adapter{Digest: sha256.Sum256(data), base: base, data: data, layers: make([][loraN]*loraPair, base.Layers)}
	ok := false
	defer func() {
		if !ok {
			ad.Close()
		}
	}()
	ad.Name, _ = f.String("general.name")
	if _, ok := f.Get("adapter.lora.alpha"); ok {
		x, ok := f.Float("adapter.lora.alpha")
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: adapter.lora.alpha is not a finite number", ErrAdapter)
		}
		ad.Alpha = float32(x)
	}
	// Pair the tensors by base name, as llama.cpp does.
	type ab struct{ a, b *gguf.TensorInfo }
	pairs := map[string]*ab{}
	var order []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		name, half := t.Name, 0
		switch {
		case strings.HasSuffix(name, ".lora_a"):
			name = strings.TrimSuffix(name, ".lora_a")
		case strings.HasSuffix(name, ".lora_b"):
			name, half = strings.TrimSuffix(name, ".lora_b"), 1
		default:
			return nil, fmt.Errorf("%w: tensor %s is neither .lora_a nor .lora_b", ErrAdapter, t.Name)
		}
		p := pairs[name]
		if p == nil {
			p = &ab{}
			pairs[name] = p
			order = append(order, name)
		}
		if half == 0 {
			p.a = t
		} else {
			p.b = t
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%w: no lora_a/lora_b tensors", ErrAdapter)
	}
	for _, name := range order {
		p := pairs[name]
		if p.a == nil || p.b == nil {
			return nil, fmt.Errorf("%w: tensor pair for %s is missing one component", ErrAdapter, name)
		}
		slot, rows, cols, err := base.loraTarget(name)
		if err != nil {
			return nil, err
		}
		a, b := *p.a, *p.b
		if len(a.Dims) != 2 || len(b.Dims) != 2 || a.Dims[0] != uint64(cols) || b.Dims[1] != uint64(rows) {
			return nil, fmt.Errorf("%w: tensor %s has shape [%d %d] but %s is %v and %s is %v", ErrAdapter, name, cols, rows, a.Name, a.Dims, b.Name, b.Dims)
		}
		if a.Dims[1] != b.Dims[0] || a.Dims[1] == 0 || a.Dims[1] > uint64(min(rows, cols)) {
			return nil, fmt.Errorf("%w: %s is %v and %s is %v: not a rank ≤ %d pair (lora_a must be transposed)", ErrAdapter, a.Name, a.Dims, b.Name, b.Dims, min(rows, cols))
		}
		rank := int(a.Dims[1])
		pr := &loraPair{rank: rank, scale: 1}
		if ad.Alpha != 0 {
			pr.scale = ad.Alpha / float32(rank)
		}
		if pr.a, err = ad.matrix(f, a, rank, cols); err != nil {
			return nil, err
		}
		if pr.b, err = ad.matrix(f, b, rows, rank); err != nil {
			return nil, err
		}
		if expand {
			if pr.bt, err = ad.transposed(f, b, rows, rank); err != nil {
				return nil, err
			}
		}
		if slot.layer < 0 {
			ad.output = pr
		} else {
			ad.layers[slot.layer][slot.which] = pr
		}
		ad.Rank = max(ad.Rank, rank)
		ad.Tensors++
	}
	ok = true
	return ad, nil
}

type loraSlot struct{ layer, which int }

// loraTarget names the projection an adapter pair for base tensor name
// adapts and its shape (rows = output features, cols = input features).
func (m *Model) loraTarget(name string) (loraSlot, int, int, error) {
	q, kv := m.Heads*m.HeadDim, m.KVHeads*m.HeadDim
	if name == "output.weight" {
		if m.Tied {
			return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model (tied embeddings)", ErrAdapter, name)
		}
		return loraSlot{layer: -1}, m.Vocab, m.DModel, nil
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		if name == "token_embd.weight" || name == "output_norm.weight" {
			return loraSlot{}, 0, 0, fmt.Errorf("%w: LoRA of %s", ErrUnsupported, name)
		}
		return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model", ErrAdapter, name)
	}
	num, tname, ok := strings.Cut(rest, ".")
	li, err := strconv.Atoi(num)
	if !ok || err != nil || li < 0 || li >= m.Layers || strconv.Itoa(li) != num {
		return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model", ErrAdapter, name)
	}
	l := &m.layers[li]
	for w, n := range loraNames {
		if n != tname {
			continue
		}
		switch {
		case w <= loraV && l.fusedQKV:
			return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model (fused attn_qkv)", ErrAdapter, name)
		case w >= loraGate && l.moe != nil:
			return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model (experts)", ErrAdapter, name)
		case w == loraGate && l.fusedUp:
			return loraSlot{}, 0, 0, fmt.Errorf("%w: tensor %s does not exist in the base model (fused ffn_up)", ErrAdapter, name)
		case w == loraUp && l.fusedUp:
			return loraSlot{}, 0, 0, fmt.Errorf("%w: LoRA of %s (fused gate and up rows)", ErrUnsupported, name)
		}
		switch w {
		case loraQ:
			return loraSlot{li, w}, q, m.DModel, nil
		case loraK, loraV:
			return loraSlot{li, w}, kv, m.DModel, nil
		case loraO:
			return loraSlot{li, w}, m.DModel, q, nil
		case loraGate, loraUp:
			return loraSlot{li, w}, m.FFN, m.DModel, nil
		default:
			return loraSlot{li, w}, m.DModel, m.FFN, nil
		}
	}
	return loraSlot{}, 0, 0, fmt.Errorf("%w: LoRA of %s", ErrUnsupported, name)
}

func (ad *Adapter) matrix(f *gguf.File, t gguf.TensorInfo, rows, cols int) (kernels.Matrix, error) {
	dt := kernels.DType(t.Type)
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: tensor %s has type %v", ErrUnsupported, t.Name, t.Type)
	}
	w, err := ad.base.b.NewMatrix(dt, rows, cols, f.Data(t))
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %s: %v", ErrAdapter, t.Name, err)
	}
	ad.bytes += int64(t.Size)
	return w, nil
}

// transposed uploads Bᵀ (rank×rows, float32) for a kernels.LowRankAdder.
func (ad *Adapter) transposed(f *gguf.File, t gguf.TensorInfo, rows, rank int) (kernels.Tensor, error) {
	bm := make([]float32, rows*rank)
	if err := kernels.Dequantize(bm, kernels.DType(t.Type), f.Data(t)); err != nil {
		return nil, fmt.Errorf("%w: tensor %s: %v", ErrAdapter, t.Name, err)
	}
	bt := make([]float32, rank*rows)
	for o := range rows {
		for j := range rank {
			bt[j*rows+o] = bm[o*rank+j]
		}
	}
	x, err := ad.base.b.NewTensor(rank, rows)
	if err != nil {
		return nil, err
	}
	ad.owned = append(ad.owned, x)
	return x, ad.base.b.Upload(x, bt)
}

// loraGroup is the rows of one batch that carry one adapter, in row order.
type loraGroup struct {
	ad   *Adapter
	rows []int
}

// loraGroups groups rows by adapter (nil: none), in order of first row.
func loraGroups(perRow []*Adapter) []loraGroup {
	var gs []loraGroup
	for r, ad := range perRow {
		if ad == nil {
			continue
		}
		i := 0
		for i < len(gs) && gs[i].ad != ad {
			i++
		}
		if i == len(gs) {
			gs = append(gs, loraGroup{ad: ad})
		}
		gs[i].rows = append(gs[i].rows, r)
	}
	return gs
}

// loraScratch holds the gathered inputs, the rank-wide intermediates and the
// deltas of the low-rank products, one tensor per width, each at least
// rows high.
type loraScratch struct {
	in, mid, out map[int]kernels.Tensor
}

func (s *loraScratch) free(b kernels.Backend) {
	for _, m := range []map[int]kernels.Tensor{s.in, s.mid, s.out} {
		for _, t := range m {
			b.Free(t)
		}
	}
	*s = loraScratch{}
}

func (m *Model) loraBuf(set *map[int]kernels.Tensor, rows, cols int) (kernels.Tensor, error) {
	if *set == nil {
		*set = map[int]kernels.Tensor{}
	}
	t := (*set)[cols]
	if t == nil || t.Rows() < rows {
		if t != nil {
			m.b.Free(t)
			delete(*set, cols)
		}
		var err error
		if t, err = m.b.NewTensor(max(rows, m.sc.rows), cols); err != nil {
			return nil, err
		}
		(*set)[cols] = t
	}
	return t.Slice(0, rows), nil
}

// applyLoRA adds, to each row of dst whose sequence carries an adapter with
// a pair for the projection (layer, which; layer −1: the output), that
// pair's Scale·B·(A·x) — as llama.cpp's build_lora_mm adds it after the
// base product: ggml_mul_mat(b, ggml_mul_mat(a, x)), ggml_scale, ggml_add.
// The rows of one adapter are gathered (a Copy per row unless they are
// contiguous) so that each pair runs over all its rows at once: the shrink
// A·x as a matrix product, the expand on a kernels.LowRankAdder as Rank
// scaled rows of Bᵀ added into dst's rows (a matrix product's dot products
// of length Rank cost several times more), else as a matrix product,
// Scale and Add. Every step is row-wise, so a row's result does not depend
// on the others (Punica/S-LoRA's segmented products, batch invariant).
func (m *Model) applyLoRA(groups []loraGroup, layer, which int, dst, x kernels.Tensor) error {
	b, s := m.b, &m.sc.lora
	for _, g := range groups {
		var p *loraPair
		if layer < 0 {
			p = g.ad.output
		} else {
			p = g.ad.layers[layer][which]
		}
		if p == nil {
			continue
		}
		n, r0 := len(g.rows), g.rows[0]
		contiguous := g.rows[n-1]-r0 == n-1
		xg := x.Slice(r0, r0+n)
		if !contiguous {
			var err error
			if xg, err = m.loraBuf(&s.in, n, x.Cols()); err != nil {
				return err
			}
			for i, r := range g.rows {
				if err := b.Copy(xg.Slice(i, i+1), x.Slice(r, r+1)); err != nil {
					return err
				}
			}
		}
		mid, err := m.loraBuf(&s.mid, n, p.rank)
		if err != nil {
			return err
		}
		if p.bt != nil {
			// Expand as a sum of Rank scaled rows of Bᵀ, into dst's rows.
			if err := b.MatMul(mid, xg, p.a); err != nil {
				return err
			}
			var rows []int
			out := dst.Slice(r0, r0+n)
			if !contiguous {
				rows, out = g.rows, dst
			}
			if err := b.(kernels.LowRankAdder).AddLowRank(out, mid, p.bt, rows, p.scale); err != nil {
				return err
			}
			continue
		}
		delta, err := m.loraBuf(&s.out, n, dst.Cols())
		if err != nil {
			return err
		}
		if err := b.MatMul(mid, xg, p.a); err != nil {
			return err
		}
		if err := b.MatMul(delta, mid, p.b); err != nil {
			return err
		}
		if err := b.(kernels.Scaler).Scale(delta, delta, p.scale); err != nil {
			return err
		}
		if contiguous {
			if err := b.Add(dst.Slice(r0, r0+n), dst.Slice(r0, r0+n), delta); err != nil {
				return err
			}
			continue
		}
		for i, r := range g.rows {
			if err := b.Add(dst.Slice(r, r+1), dst.Slice(r, r+1), delta.Slice(i, i+1)); err != nil {
				return err
			}
		}
	}
	return nil
}
