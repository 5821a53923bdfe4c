package kernels

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// Backend computes transformer kernels on one device. Activations live in
// backend-owned Tensors (host memory for kernels/cpu, device memory for a GPU
// backend); the engine moves data across with Upload and Download only at the
// edges of a step (token ids in, logits out). Weights are Matrices created once
// from raw GGUF bytes.
//
// Every operation checks shapes and returns an error wrapping ErrShape (code
// invalid_request_error) before touching any output. A backend may run
// operations asynchronously; it then reports an operation's error no later than
// the next Download, and the output of a failed operation is never written.
// kernels/cpu runs every operation synchronously.
//
// Methods may be called from several goroutines, but two calls that write the
// same Tensor (or the same Arena page), or one that writes and one that reads
// it, must not overlap.
//
// Conventions: a Tensor is a row-major rows×cols matrix of float32; a row is one
// token. MatMul(dst, x, w) computes dst = x·wᵀ, i.e. dst[r][o] = Σᵢ x[r][i]·w[o][i],
// with w stored as GGUF stores it (ne0 = cols = input features, ne1 = rows =
// output features).
//
// Determinism (all backends): the result for one row depends only on that
// row's inputs (and, for attention, on the KV its block table names), never on
// the other rows in the batch, their number or the thread count: each output
// element has a fixed reduction order. Repeating an operation gives
// bit-identical results.
type Backend interface {
	// Name returns the name the backend was registered under.
	Name() string

	// NewTensor allocates a zeroed rows×cols float32 tensor.
	NewTensor(rows, cols int) (Tensor, error)
	// Upload copies src (len rows×cols, row-major) into t.
	Upload(t Tensor, src []float32) error
	// Download copies t into dst (len rows×cols), waiting for every operation
	// queued before it; it returns the first error of an asynchronous
	// operation that wrote t.
	Download(dst []float32, t Tensor) error
	// Free releases t's memory. Using t (or a Slice of it) afterwards is a
	// bug; Free of a Slice is a no-op.
	Free(t Tensor)

	// NewMatrix wraps rows×cols weights of dtype dt stored in data, in GGUF
	// layout: rows after each other, each row RowBytes(cols) bytes. cols must
	// be a multiple of dt.BlockSize(). The backend may keep data (e.g. a
	// memory-mapped file) for the Matrix's lifetime: the caller must not
	// modify it.
	NewMatrix(dt DType, rows, cols int, data []byte) (Matrix, error)

	// MatMul sets dst = x·wᵀ: dst is x.Rows()×w.Rows(), x is
	// x.Rows()×w.Cols(). A one-row x is the decode matrix-vector product.
	// Q8_0 and Q4_K weights may quantize x to 8 bits per 32-element block
	// first (as llama.cpp does); kernelstest states the tolerance.
	MatMul(dst, x Tensor, w Matrix) error
	// Embed sets dst row r to row ids[r] of w, dequantized to float32.
	// dst is len(ids)×w.Cols(); an id outside [0, w.Rows()) is ErrShape.
	Embed(dst Tensor, w Matrix, ids []int32) error
	// RMSNorm sets dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ weight, where
	// weight is a 1×cols tensor. dst may be x. weight may also be 1×g with g
	// dividing cols: each run of g consecutive elements of a row (one head,
	// for qwen3's per-head Q/K norm) is then normalised on its own and
	// multiplied by weight.
	RMSNorm(dst, x, weight Tensor, eps float32) error
	// RoPE rotates, in place, each head of each row of x (x.Cols() =
	// heads×p.HeadDim) by the angle of position pos[r] (len(pos) =
	// x.Rows()), as llama.cpp's rope_ext without YaRN.
	RoPE(x Tensor, pos []int32, p RoPE) error
	// SwiGLU sets dst = silu(gate) ⊙ up elementwise; dst may alias either.
	SwiGLU(dst, gate, up Tensor) error
	// SiLU sets dst = x·sigmoid(x) elementwise; dst may be x.
	SiLU(dst, x Tensor) error
	// Softmax replaces each row of x by its softmax, in place.
	Softmax(x Tensor) error
	// Add sets dst = a + b elementwise. b may also have one row, which is
	// then added to every row of a (a bias). dst may alias a or b.
	Add(dst, a, b Tensor) error
	// Copy copies src into dst (same shape). Together with Tensor.Slice it
	// gathers rows, e.g. the last token of every sequence before the output
	// projection.
	Copy(dst, src Tensor) error

	// NewArena allocates a zeroed KV arena; every page starts with the zero
	// Tag. Errors: ErrShape for a bad geometry, ErrKVType for a KV type the
	// backend does not store.
	NewArena(c ArenaConfig) (Arena, error)

	// Close releases the backend's resources (worker goroutines, device
	// context). Tensors, Matrices and Arenas are unusable afterwards.
	Close() error
}

// Tensor is a backend-owned rows×cols float32 matrix. Only the Backend that
// created it may use it.
type Tensor interface {
	Rows() int
	Cols() int
	// Slice returns a view of rows [r0, r1) that shares t's memory. It
	// panics if the range is outside [0, Rows()], as slicing does.
	Slice(r0, r1 int) Tensor
}

// Matrix is a weight matrix held by a backend. See Backend.NewMatrix.
type Matrix interface {
	DType() DType
	Rows() int
	Cols() int
}

// RoPE holds rotary position embedding parameters. The angle of pair i of a
// head at position p is
//
//	θ = p · Scale · Base^(−2i/Dims) / Factors[i]
//
// (Factors omitted: 1). Normal layout rotates the pairs (x[2i], x[2i+1]);
// NeoX layout rotates (x[i], x[i+Dims/2]). Elements at index ≥ Dims of a head
// are left as they are (partial rotary).
type RoPE struct {
	HeadDim int       // elements per head; x.Cols() must be a multiple
	Dims    int       // rotated elements per head (even, ≤ HeadDim); 0 means HeadDim
	NeoX    bool      // NeoX (GPT-NeoX, Qwen2, …) layout instead of normal (llama)
	Base    float32   // frequency base (rope.freq_base), e.g. 10000
	Scale   float32   // frequency scale (1/rope.scaling.factor for linear scaling); 0 means 1
	Factors []float32 // optional per-pair frequency factors (llama3 rope_freqs), len Dims/2
}

// Check validates p for rows of cols values and npos positions of rows
// rows, and returns the rotated dimensions per head (Dims, or HeadDim).
func (p RoPE) Check(cols, rows, npos int) (dims int, err error) {
	dims = p.Dims
	if dims == 0 {
		dims = p.HeadDim
	}
	switch {
	case p.HeadDim <= 0 || cols%p.HeadDim != 0:
		return 0, shapeErr("rope head dim %d for rows of %d", p.HeadDim, cols)
	case dims <= 0 || dims%2 != 0 || dims > p.HeadDim:
		return 0, shapeErr("rope dims %d with head dim %d", dims, p.HeadDim)
	case npos != rows:
		return 0, shapeErr("rope with %d positions for %d rows", npos, rows)
	case !(p.Base > 0):
		return 0, shapeErr("rope base %v", p.Base)
	case p.Factors != nil && len(p.Factors) != dims/2:
		return 0, shapeErr("rope with %d frequency factors for %d pairs", len(p.Factors), dims/2)
	}
	return dims, nil
}

// KVType is the element type an arena stores K and V in.
type KVType uint8

const (
	KVF32 KVType = iota // float32, the default (zero value)
	KVF16               // IEEE binary16, rounded to nearest even on write (as F32ToF16)
)

// String returns "f32" or "f16"; other values give "kvtype(N)".
func (t KVType) String() string {
	switch t {
	case KVF32:
		return "f32"
	case KVF16:
		return "f16"
	}
	return fmt.Sprintf("kvtype(%d)", uint8(t))
}

// ParseKVType parses "f32" or "f16" (any case).
//
// Errors: one wrapping ErrKVType for any other string.
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f32":
		return KVF32, nil
	case "f16":
		return KVF16, nil
	}
	return 0, fmt.Errorf("%w: %q (want f32 or f16)", ErrKVType, s)
}

// MarshalText returns String's name (for flags and configuration files).
func (t KVType) MarshalText() ([]byte, error) {
	if t.Size() == 0 {
		return nil, fmt.Errorf("%w: %v", ErrKVType, t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses a name as ParseKVType does.
func (t *KVType) UnmarshalText(b []byte) error {
	v, err := ParseKVType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Size returns the bytes per element: 4 for KVF32, 2 for KVF16, 0 for an
// unknown type.
func (t KVType) Size() int {
	switch t {
	case KVF32:
		return 4
	case KVF16:
		return 2
	}
	return 0
}

// ArenaConfig sizes a KV arena.
type ArenaConfig struct {
	Pages      int // number of pages, indexed as the isolation.Pool indexes them
	PageTokens int // token slots per page; equal to the pool's
	Layers     int
	KVHeads    int
	HeadDim    int
	KV         KVType // element type of the stored K and V; zero: KVF32
}

// PageBytes returns the size of one page in the transfer format (see Arena):
// KV.Size() bytes per element.
func (c ArenaConfig) PageBytes() int {
	return c.Layers * 2 * c.PageTokens * c.KVHeads * c.HeadDim * c.KV.Size()
}

// Validate reports an ErrShape error if c cannot describe an arena, and an
// error wrapping ErrKVType for an unknown KV type.
func (c ArenaConfig) Validate() error {
	if c.KV.Size() == 0 {
		return fmt.Errorf("%w: arena config %+v: KV type %v", ErrKVType, c, c.KV)
	}
	if c.Pages <= 0 || c.PageTokens <= 0 || c.Layers <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 {
		return fmt.Errorf("%w: arena config %+v: every field must be positive", ErrShape, c)
	}
	const maxElems = 1 << 40
	if int64(c.Pages)*int64(c.PageTokens)*int64(c.Layers)*int64(c.KVHeads)*int64(c.HeadDim) > maxElems {
		return fmt.Errorf("%w: arena config %+v too large", ErrShape, c)
	}
	return nil
}

// Arena is a paged KV cache of ArenaConfig.Pages pages. Each page holds, for
// every layer, the K and V vectors of PageTokens token slots, and carries an
// ownership isolation.Tag.
//
// There is no way to read a page's contents except through an
// isolation.BlockTable, which only isolation.Pool builds: Attention and
// CopyOut compare the arena's Tag of every page they read with the table's
// expected Tag first and, on any mismatch, return a *TagMismatchError and
// write no output. WriteKV and CopyIn write only pages the table marks
// Writable and set their Tag to the table's.
//
// Besides the tag, the arena counts the leading slots of each page and layer
// that were written under the current tag (the fill). Writes may not skip
// slots (a write's first slot in a page is at most the fill), and reads need
// every slot they read to be filled, else an *UnwrittenError: the arena
// itself catches pool books that claim slots were written when no KV arrived.
// A page whose tag changes is zeroed first and its fill restarts at 0, so a
// page tagged T never holds bytes that T's lease did not write.
//
// Transfer format of a page (CopyOut/CopyIn, identical on every backend):
// the page in its stored type (ArenaConfig.KV): little-endian float32 for
// KVF32, little-endian IEEE binary16 for KVF16, laid out
// [layer][K, V][slot][kv_head][head_dim]; PageBytes() bytes in all. Pages
// move only between arenas of the same configuration, KV type included.
//
// A KVF16 arena rounds every K and V element to the nearest half (ties to
// even, F32ToF16) when it is written; attention then computes over those
// rounded values (F16ToF32 of what is stored) as a KVF32 arena would over
// them.
type Arena interface {
	Config() ArenaConfig
	// PageBytes returns Config().PageBytes().
	PageBytes() int
	// Tag returns page's current ownership tag (the zero Tag when scrubbed
	// or never written). Reading a tag reveals no KV contents.
	Tag(page int32) isolation.Tag

	// WriteKV stores K and V rows of one layer for each span: row s.Row+j of
	// k and v (each kv_heads×head_dim wide) goes to position s.Pos+j of
	// s.Table. Every position must be below Table.Tokens() (the pool records
	// the write first) and fall in a Writable page, else ErrShape or
	// ErrReadOnlyPage and nothing is written; a write that would skip slots
	// is an *UnwrittenError. Each page written takes the table's Tag for it
	// (zeroed first if it had another). One call writes a page from one span
	// only (ErrShape otherwise).
	WriteKV(layer int, k, v Tensor, spans []Span) error

	// Attention computes causal scaled-dot-product attention (scale
	// 1/sqrt(head_dim), grouped-query: query head h reads kv head
	// h/(q_heads/kv_heads)) for each span: query row s.Row+j of q, at
	// position s.Pos+j, attends to positions 0…s.Pos+j of s.Table and its
	// result goes to row s.Row+j of out. q and out are q_heads×head_dim wide
	// and must not overlap; spans must not share rows. s.Pos+s.N must not
	// exceed Table.Tokens(). Before reading anything, the
	// tag of every page any span reads is compared with the table's and its
	// fill with the slots read: on a mismatch it returns a *TagMismatchError
	// (errors.Is ErrTagMismatch) or an *UnwrittenError and out is not
	// written. A table whose tag for a page is the zero Tag never matches.
	Attention(layer int, out, q Tensor, spans []Span) error

	// ZeroPages zeroes the KV bytes of the given pages (all layers) and
	// resets their tags to the zero Tag and their fills to 0; a page index
	// outside the arena is ErrShape and nothing is zeroed. This is the scrub step of the pool:
	// call it for the pages Pool hands out to scrub, BEFORE confirming.
	ZeroPages(pages []int32) error

	// CopyOut copies page table.Page(i) into dst (len PageBytes()) in the
	// transfer format, after checking its tag against table.Tag(i) (a
	// *TagMismatchError otherwise) and that every slot covered by
	// table.Tokens() was written in every layer (an *UnwrittenError
	// otherwise); on error dst is untouched. Slots at positions not covered
	// by table.Tokens() are written as zeros, so a page never carries out
	// bytes its lease did not write.
	CopyOut(dst []byte, table isolation.BlockTable, i int) error
	// CopyIn writes src (len PageBytes(), transfer format) into page
	// table.Page(i), which must be Writable, and sets its tag to
	// table.Tag(i); its fill becomes the slots covered by table.Tokens().
	// Slots beyond them are zeroed instead of copied.
	CopyIn(table isolation.BlockTable, i int, src []byte) error
}

// Span names consecutive token rows of one sequence in a batch: rows
// [Row, Row+N) of the activation tensors are positions [Pos, Pos+N) of the
// sequence whose pages Table lists.
type Span struct {
	Table isolation.BlockTable
	Row   int
	Pos   int
	N     int
}

// UnwrittenError reports that a read (or a write that would skip slots) needs
// slots of a page that the arena never saw written: the pool's books say the
// positions were written (a transfer that reported success without writing,
// say) but no KV arrived. Nothing was read or written.
type UnwrittenError struct {
	Page  int32
	Layer int
	Need  int // slots the operation needs written (reads) or may start at (writes)
	Have  int // slots the arena has seen written in this page and layer
}

func (e *UnwrittenError) Error() string {
	return fmt.Sprintf("kernels: page %d layer %d: %d slots needed, %d written", e.Page, e.Layer, e.Need, e.Have)
}

// Is makes errors.Is(err, ErrUnwritten) true.
func (e *UnwrittenError) Is(target error) bool { return target == ErrUnwritten }

// PublicMessage is ErrUnwritten's message; the page and lease stay in Error.
func (e *UnwrittenError) PublicMessage() string { return ErrUnwritten.Message }

// ErrorCode reports cloison.CodeIsolationViolation.
func (e *UnwrittenError) ErrorCode() cloison.Code { return cloison.CodeIsolationViolation }

// Errors. Callers branch with errors.Is / errors.As; cloison.ErrorCode gives
// the API code.
var (
	// ErrShape: tensor shapes, dtypes, indices or parameters that do not fit
	// the operation. A bug in the caller; nothing was written.
	ErrShape = cloison.NewError(cloison.CodeInvalid, "kernels: shape mismatch")
	// ErrReadOnlyPage: a write into a page its table marks read-only (a
	// shared prefix page).
	ErrReadOnlyPage = cloison.NewError(cloison.CodeIsolationViolation, "kernels: write into a read-only page")
	// ErrTagMismatch is matched by every *TagMismatchError.
	ErrTagMismatch = cloison.NewError(cloison.CodeIsolationViolation, "kernels: page ownership tag mismatch")
	// ErrUnwritten is matched by every *UnwrittenError.
	ErrUnwritten = cloison.NewError(cloison.CodeIsolationViolation, "kernels: read of unwritten KV slots")
	// ErrKVType: a KV element type the backend does not store (an unknown
	// KVType, or KVF16 on a backend without it), or a name ParseKVType does
	// not know.
	ErrKVType = cloison.NewError(cloison.CodeInvalid, "kernels: unsupported KV type")
	// ErrUnknownBackend: Open of a name nobody registered.
	ErrUnknownBackend = cloison.NewError(cloison.CodeInvalid, "kernels: unknown backend")
	// ErrClosed: use of a backend after Close.
	ErrClosed = cloison.NewError(cloison.CodeInternal, "kernels: backend closed")
	// ErrStaged: Attention, CopyOut or WriteKV through a staging table,
	// whose pages hold transferred KV not yet verified. Only CopyIn may use
	// a staging table.
	ErrStaged = cloison.NewError(cloison.CodeIsolationViolation, "kernels: a staging table (unverified transfer) serves only CopyIn")
)

// TagMismatchError reports that a page's arena tag is not the one its block
// table expects: the page was scrubbed, reused by another lease, or the table
// is not for this page's owner. Nothing was read.
type TagMismatchError struct {
	Page int32
	Want isolation.Tag // the block table's tag
	Got  isolation.Tag // the arena's tag
}

func (e *TagMismatchError) Error() string {
	return fmt.Sprintf("kernels: page %d ownership tag mismatch: table expects %+v, arena holds %+v", e.Page, e.Want, e.Got)
}

// Is makes errors.Is(err, ErrTagMismatch) true.
func (e *TagMismatchError) Is(target error) bool { return target == ErrTagMismatch }

// PublicMessage is ErrTagMismatch's message; the tags stay in Error.
func (e *TagMismatchError) PublicMessage() string { return ErrTagMismatch.Message }

// ErrorCode reports cloison.CodeIsolationViolation.
func (e *TagMismatchError) ErrorCode() cloison.Code { return cloison.CodeIsolationViolation }

// Options configure a backend at Open.
type Options struct {
	// Threads is the number of worker threads (CPU); 0 means GOMAXPROCS.
	Threads int
	// Device selects a device (GPU ordinal); ignored by kernels/cpu.
	Device int
	// Unsafe switches the arenas' ownership checks off in a build with the
	// faults tag (unsafe_faults.go); empty in the default build.
	Unsafe Unsafe
}

// Factory opens a backend.
type Factory func(Options) (Backend, error)

var registry struct {
	sync.Mutex
	m map[string]Factory // guarded by the mutex
}

// Register makes a backend available to Open under name. Backends call it
// from init(). It panics if name is empty, f is nil, or name is taken.
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" || f == nil {
		panic("kernels: Register with empty name or nil factory")
	}
	if _, dup := registry.m[name]; dup {
		panic("kernels: Register called twice for backend " + name)
	}
	if registry.m == nil {
		registry.m = make(map[string]Factory)
	}
	registry.m[name] = f
}

// Open opens the backend registered under name (import its package, e.g.
// _ "github.com/cloison/cloison/kernels/cpu"). Unknown names give
// ErrUnknownBackend.
func Open(name string, o Options) (Backend, error) {
	registry.Lock()
	f, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		hint := ""
		if name == "cuda" {
			// Default builds never import kernels/cuda (gorgonia.org/cu links
			// libcuda and exits the process from its init without a driver).
			hint = "; rebuild with `go build -tags cuda ./cmd/cloisond` (needs the CUDA driver library at run time; see kernels/cuda/doc.go)"
		}
		return nil, fmt.Errorf("%w: %q (registered: %v)%s", ErrUnknownBackend, name, Backends(), hint)
	}
	return f(o)
}

// Backends returns the registered backend names, sorted.
func Backends() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MultiMatMuler is an optional Backend capability: several products that share
// their input in one call (the Q, K and V projections; gate and up). A backend
// can then prepare x once (e.g. quantize it) and schedule all output rows as
// one parallel job. The results are bit-identical to separate MatMul calls.
// Use the MultiMatMul function, which falls back to MatMul.
type MultiMatMuler interface {
	MultiMatMul(dsts []Tensor, x Tensor, ws []Matrix) error
}

// MultiMatMul sets dsts[i] = x·ws[i]ᵀ for every i, in one call when b
// implements MultiMatMuler.
func MultiMatMul(b Backend, dsts []Tensor, x Tensor, ws []Matrix) error {
	if len(dsts) != len(ws) {
		return fmt.Errorf("%w: MultiMatMul with %d outputs and %d matrices", ErrShape, len(dsts), len(ws))
	}
	if m, ok := b.(MultiMatMuler); ok {
		return m.MultiMatMul(dsts, x, ws)
	}
	for i := range ws {
		if err := b.MatMul(dsts[i], x, ws[i]); err != nil {
			return err
		}
	}
	return nil
}
