package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node/prefill"
	"github.com/cloison/cloison/tenancy"
)

// A node serves a set of models: the one it was started with (Config.Model:
// the engine every operation not tied to a request runs on, the replay
// engine's model) and further ones (Config.Models at start, LoadModel at run
// time). Each has its own instance (weights, backend), KV pool — every
// stored tenant's partition, sized by Capacity — arena, engine and capacity
// attestation, recorded in the ledger (capacity.attestation, with the
// model's digest) whether it passed or not: a model whose pool cannot hold
// one full context is refused, as the first one stops the node. Requests
// name a model in their model field (api.Server.AddModel routes them).
//
// On a decode node each further model also has its own transfer receiver
// (the node's transfer.Router hands it the transfers naming its digest)
// and engine.Remote (prefill with its digest), and its attestation checks
// every prefill node asked now for it (attestPrefillModel): a model one of
// them lacks, stores as another KV type or cannot hold a whole request of
// is refused, its failed attestation recorded. A model file is served once
// per decode node (ErrSplitModels): transfers are routed by its digest.
//
// Memory (Config.MemoryBudget) counts each model's weights and KV arena
// (modelBytes); a model that does not fit what the others leave is
// refused with the figures (api.MemoryBudgetError), never loaded in part
// and never swapped for another.
//
// Ordering duties:
//   - The attestation is recorded BEFORE the model serves; a failed one
//     refuses the load.
//   - A run-time load ledgers model.loaded (signed: an admin action) BEFORE
//     the model serves, an unload model.unloaded BEFORE it stops serving;
//     when the ledger cannot record it the change does not happen.
//   - An unloaded model's engine stops AFTER it no longer serves: requests
//     that named it before finish with an error, never a normal finish.
//   - A decode node's model is routed transfers BEFORE it serves and no
//     longer routed (Router.Remove) BEFORE its engine stops.

// Errors of the model operations.
var (
	// ErrNoModelDir: run-time loads read only from the node's model
	// directory, and this node has none.
	ErrNoModelDir = cloison.NewError(cloison.CodeInvalid, "this node loads no model at run time (start it with --model-dir)")
	// ErrModelPath: the path is not a file inside the model directory.
	ErrModelPath = cloison.NewError(cloison.CodeInvalid, "path must name a .gguf file inside the node's model directory")
	// ErrModelID: a model id the ledger cannot record (letters, digits and
	// . _ : / @ + - only; at most audit.MaxNameLen).
	ErrModelID = cloison.NewError(cloison.CodeInvalid, "model id must be letters, digits and . _ : / @ + - (name one with id=)")
	// ErrSplitModels: a decode node serves a model file once (its
	// transfers are routed by the file's digest).
	ErrSplitModels = cloison.NewError(cloison.CodeInvalid, "a decode node serves a model file once")
)

// served is one further model a node serves.
type served struct {
	inst  *prefill.Instance // nil when the caller owns the instance
	model Model
	eng   *engine.Engine
	att   attest.Attestation
	bytes int64
	// capacity is a decode node's prompt bound for this model: the
	// smallest prefill pool that attested it (engine.Remote.Capacity).
	capacity int

	stop context.CancelFunc // its engine's Run; nil before Start
	done chan struct{}      // closed when Run returned
}

// models is the node's further models and its memory use.
type models struct {
	// ops serializes loads and unloads: a name checked free stays free
	// until its model.loaded is ledgered and it serves, so the ledger
	// never records a load that did not happen.
	ops     sync.Mutex
	mu      sync.Mutex
	byID    map[string]*served // guarded by mu
	used    int64              // bytes of every model, the first included; guarded by mu
	started bool               // Start ran: a loaded model's engine runs at once; guarded by mu
}

// ModelID is the id requests name a model by: alias when given, else the
// file's general.name, else the file name without .gguf (api: the model
// field). It is what LoadModel and --model serve it as.
func ModelID(inst *prefill.Instance, path, alias string) string {
	if alias != "" {
		return alias
	}
	if inst != nil && inst.Name != "" && inst.Name != "cloison-context-bag" {
		return inst.Name
	}
	if path != "" {
		return strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	if inst != nil {
		return inst.Name
	}
	return ""
}

// modelBytes is what a model holds in memory, as the budget counts it: its
// weights and its KV arena (every page of its pool).
func modelBytes(m Model, c Capacity) int64 {
	arena := int64(m.Model.ArenaConfig(c.Pool.Pages, c.Pool.PageTokens, c.KV).PageBytes()) * int64(c.Pool.Pages)
	return m.Model.WeightBytes() + arena
}

// reserve counts need bytes of model id against the budget.
// Errors: *api.MemoryBudgetError.
func (n *Node) reserve(id string, need int64) error {
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	if b := n.cfg.MemoryBudget; b > 0 && n.models.used+need > b {
		return &api.MemoryBudgetError{Model: id, Need: need, InUse: n.models.used, Budget: b}
	}
	n.models.used += need
	return nil
}

func (n *Node) release(bytes int64) {
	n.models.mu.Lock()
	n.models.used -= bytes
	n.models.mu.Unlock()
}

// attestModel builds m's pool with every stored tenant's partition and
// attests it, recording the attestation whether it passed or not.
// Errors: attest.ErrFailed, the tenant store's, the ledger's.
func (n *Node) attestModel(ctx context.Context, m Model) (*isolation.Pool, attest.Attestation, int, error) {
	c := n.cfg.Capacity
	// The node's served context bounds every model's; a model of a
	// shorter context serves its own.
	if c.ServedContext > m.Model.Context {
		c.ServedContext = m.Model.Context
	}
	pool, err := isolation.NewPool(c.Pool)
	if err != nil {
		return nil, attest.Attestation{}, 0, err
	}
	all, err := n.cfg.Tenants.Tenants(ctx)
	if err != nil {
		return nil, attest.Attestation{}, 0, err
	}
	reserved := map[cloison.TenantID]int{}
	for _, t := range all {
		if err := pool.AddTenant(prefill.PoolTenant(t)); err != nil {
			return nil, attest.Attestation{}, 0, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		if t.Tier == isolation.TierDedicated {
			reserved[t.ID] = t.Quotas.KVPages
		}
	}
	att, aerr := c.Attest(m.Model, reserved)
	att.Model, att.ModelDigest = m.Name, hex.EncodeToString(m.Digest[:])
	capacity := 0
	if aerr == nil && n.cfg.Decode != nil {
		// Every prefill node asked must serve this model, of the same
		// digest and KV type, and hold a whole request of its served
		// context: a model that one of them fails is refused here.
		att, capacity, aerr = n.attestPrefillModel(ctx, att, m)
	}
	if err := n.recordAttestation(ctx, m, att, aerr == nil); err != nil {
		return nil, att, 0, err
	}
	return pool, att, capacity, aerr
}

// attestPrefillModel checks the prefill nodes asked now in for further
// model m (attest.Prefill, with m's digest and attestation).
// Errors: attest.ErrFailed, the prefill client's.
func (n *Node) attestPrefillModel(ctx context.Context, att attest.Attestation, m Model) (attest.Attestation, int, error) {
	peers, err := n.cfg.Decode.Client.Attest(ctx, hex.EncodeToString(m.Digest[:]))
	if err != nil {
		att.OK, att.Reason = false, "prefill nodes: "+cloison.PublicMessage(err)
		return att, 0, fmt.Errorf("%w: %s", attest.ErrFailed, att.Reason)
	}
	return prefill.CheckPeers(n.cfg.Decode.AttestUnsafe, att, hex.EncodeToString(m.Digest[:]), peers)
}

// splitChecks are what a prefill node joining a decode node's set must
// attest for each further model (peerWatcher.further).
func (n *Node) splitChecks() []peerCheck {
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	out := make([]peerCheck, 0, len(n.models.byID))
	for _, sv := range n.models.byID {
		self := sv.att
		self.Prefill = nil
		out = append(out, peerCheck{model: sv.model.Name, self: self, digest: hex.EncodeToString(sv.model.Digest[:]), capacity: sv.capacity})
	}
	return out
}

// recordAttestation ledgers capacity.attestation for model m.
func (n *Node) recordAttestation(ctx context.Context, m Model, att attest.Attestation, ready bool) error {
	d := audit.Digest(m.Digest)
	if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: n.cfg.Actor, Payload: audit.CapacityAttestation{Node: audit.Name(n.cfg.NodeName),
		Model: audit.Name(m.Name), ModelDigest: &d, AdvertisedContext: int64(att.ModelContext), ServableContext: int64(att.ServedContext),
		PoolPages: int64(att.PoolPages), PageTokens: int64(att.PageTokens), Ready: ready, Region: labelName(att.Labels.Region),
		Tier: labelName(att.Labels.Tier), Prefill: prefillCapacities(att)}}); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// addModel makes m a model the node serves: its budget, pool, attestation,
// arena and engine, and (when actor is set: a run-time load) model.loaded
// ledgered; then the API serves it, and its engine runs if the node
// started. inst, if set, is closed with the model.
func (n *Node) addModel(ctx context.Context, m Model, inst *prefill.Instance, actor audit.Name) (_ api.ModelInfo, err error) {
	n.models.ops.Lock()
	defer n.models.ops.Unlock()
	if n.cfg.Decode != nil && n.servesDigest(m.Digest) {
		return api.ModelInfo{}, ErrSplitModels.Withf("%q", m.Name)
	}
	if audit.CheckName("model", m.Name) != nil {
		return api.ModelInfo{}, ErrModelID.Withf("%.64q", m.Name)
	}
	if slices.Contains(n.Server.Models(), m.Name) {
		return api.ModelInfo{}, api.ErrModelServed.Withf("%q", m.Name)
	}
	sv := &served{inst: inst, model: m, bytes: modelBytes(m, n.cfg.Capacity)}
	if err := n.reserve(m.Name, sv.bytes); err != nil {
		return api.ModelInfo{}, err
	}
	defer func() {
		if err != nil {
			n.release(sv.bytes)
		}
	}()
	pool, att, capacity, err := n.attestModel(ctx, m)
	if err != nil {
		return api.ModelInfo{}, err
	}
	sv.att, sv.capacity = att, capacity
	arena, err := m.Backend.NewArena(m.Model.ArenaConfig(n.cfg.Capacity.Pool.Pages, n.cfg.Capacity.Pool.PageTokens, n.cfg.Capacity.KV))
	if err != nil {
		return api.ModelInfo{}, err
	}
	var recv *transfer.Receiver
	var remote *engine.Remote
	if n.cfg.Decode != nil {
		if recv, err = n.receiver(pool, arena, m); err != nil {
			return api.ModelInfo{}, err
		}
		remote = n.remote(recv, m)
		remote.Capacity = capacity
	}
	name := m.Name
	if sv.eng, err = engine.New(engine.Config{Model: m.Model, Tokenizer: m.Tokenizer, Pool: pool, Arena: arena, Attestation: att,
		Scheduler: n.cfg.Scheduler, Unsafe: n.cfg.Unsafe, Remote: remote,
		OnIncident: func(in engine.Incident) { n.Server.RecordModelIncident(name, in) }}); err != nil {
		return api.ModelInfo{}, err
	}
	info := sv.info()
	if actor != "" {
		if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.ModelLoaded{
			Node: audit.Name(n.cfg.NodeName), Model: audit.Name(m.Name), Digest: audit.Digest(m.Digest), Bytes: sv.bytes, Actor: actor}}); err != nil {
			return api.ModelInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
		}
	}
	for _, id := range n.cfg.EveryModel {
		if actor == "" {
			break // at start, Open allowed them every model
		}
		if err := allowModels(tenancy.WithActor(ctx, actor), n.cfg.Tenants, id, m.Name); err != nil {
			n.log.Warn("model not allowed to the tenant that uses every model", "tenant", id, "model", m.Name, "err", err)
		}
	}
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	var adapters *engine.Adapters
	if n.cfg.Decode == nil {
		adapters = engine.NewAdapters()
	}
	// Its transfers are routed BEFORE it serves: its engine reserves
	// pages for a transfer only once a request reaches it.
	if recv != nil {
		if err := n.router.Add(recv); err != nil {
			return api.ModelInfo{}, err
		}
	}
	if err := n.Server.AddModel(api.Model{Name: m.Name, Engine: sv.eng, Tokenizer: m.Tokenizer, Digest: audit.Digest(m.Digest),
		Adapters: adapters}); err != nil {
		if recv != nil {
			n.router.Remove(m.Digest)
		}
		return api.ModelInfo{}, err
	}
	n.models.byID[m.Name] = sv
	if n.models.started {
		sv.run()
	}
	n.log.Info("model served", "model", m.Name, "digest", info.Digest, "bytes", sv.bytes, "served_context", att.ServedContext, "by", actor)
	return info, nil
}

// servesDigest reports whether the node serves a model of file digest d.
func (n *Node) servesDigest(d transfer.Digest) bool {
	if n.cfg.Model.Digest == d {
		return true
	}
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	for _, sv := range n.models.byID {
		if sv.model.Digest == d {
			return true
		}
	}
	return false
}

// run starts sv's engine (stopEngine stops it).
func (sv *served) run() {
	ctx, stop := context.WithCancel(context.Background())
	sv.stop, sv.done = stop, make(chan struct{})
	go func() { defer close(sv.done); _ = sv.eng.Run(ctx) }()
}

// stopEngine stops sv's engine if it runs, and waits for it.
func (sv *served) stopEngine() {
	if sv.stop != nil {
		sv.stop()
		<-sv.done
		sv.stop = nil
	}
}

// close stops sv's engine and closes its instance.
func (sv *served) close() {
	sv.stopEngine()
	if sv.inst != nil {
		sv.inst.Close()
	}
}

func (sv *served) info() api.ModelInfo {
	return api.ModelInfo{ID: sv.model.Name, Digest: hex.EncodeToString(sv.model.Digest[:]), Bytes: sv.bytes,
		ServedContext: sv.att.ServedContext, PoolPages: sv.att.PoolPages}
}

// LoadModel loads req.Path from the node's model directory (Config.ModelDir)
// and serves it as req.ID (ModelID: the alias, general.name or the file
// name); api.ModelAdmin. The load is ledgered (model.loaded, with the
// admin as actor) BEFORE it serves.
//
// Errors: ErrNoModelDir, ErrModelPath, ErrModelID, ErrSplitModels,
// api.ErrModelServed, *api.MemoryBudgetError, attest.ErrFailed, the file's
// (invalid: it does not load), the ledger's.
func (n *Node) LoadModel(ctx context.Context, actor audit.Name, req api.ModelLoad) (api.ModelInfo, error) {
	dir := n.cfg.ModelDir
	if dir == "" {
		return api.ModelInfo{}, ErrNoModelDir
	}
	if !filepath.IsLocal(req.Path) || !strings.HasSuffix(req.Path, ".gguf") {
		return api.ModelInfo{}, ErrModelPath
	}
	path := filepath.Join(dir, req.Path)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return api.ModelInfo{}, ErrModelPath
	}
	mf := n.cfg.ModelFile
	mf.Path, mf.Bytes, mf.Name = path, nil, ""
	inst, err := mf.Load(mf.Options)
	if err != nil {
		n.log.Warn("model load refused", "path", req.Path, "err", err)
		return api.ModelInfo{}, cloison.NewError(cloison.CodeInvalid, "the file does not load as a model")
	}
	inst.Name = ModelID(inst, path, req.ID)
	info, err := n.addModel(ctx, inst.Model, inst, actor)
	if err != nil {
		inst.Close()
		return api.ModelInfo{}, err
	}
	return info, nil
}

// UnloadModel stops serving model id (api.ModelAdmin): model.unloaded is
// ledgered BEFORE the model stops serving, then its engine stops (requests
// still running on it end with an error) and its memory is released.
//
// Errors: api.ErrModelPrimary, api.ErrUnknownModel, the ledger's.
func (n *Node) UnloadModel(ctx context.Context, actor audit.Name, id string) (api.ModelInfo, error) {
	if id == n.cfg.Model.Name {
		return api.ModelInfo{}, api.ErrModelPrimary
	}
	n.models.ops.Lock()
	defer n.models.ops.Unlock()
	n.models.mu.Lock()
	sv, ok := n.models.byID[id]
	if !ok {
		n.models.mu.Unlock()
		return api.ModelInfo{}, api.ErrUnknownModel.Withf("%.64q", id)
	}
	if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.ModelUnloaded{
		Node: audit.Name(n.cfg.NodeName), Model: audit.Name(id), Digest: audit.Digest(sv.model.Digest), Actor: actor}}); err != nil {
		n.models.mu.Unlock()
		return api.ModelInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
	}
	delete(n.models.byID, id)
	if n.router != nil {
		// No new transfer reaches it; those in flight end with its
		// reservations when its engine stops (sv.close): cancelled, the
		// leases discarded, never committed.
		n.router.Remove(sv.model.Digest)
	}
	_, _ = n.Server.RemoveModel(id)
	n.models.used -= sv.bytes
	n.models.mu.Unlock()
	sv.close()
	n.log.Info("model unloaded", "model", id, "by", actor)
	return sv.info(), nil
}

// ServedModels are the models the node serves, its first one first
// (api.ModelAdmin).
func (n *Node) ServedModels() []api.ModelInfo {
	m := n.cfg.Model
	out := []api.ModelInfo{{ID: m.Name, Digest: hex.EncodeToString(m.Digest[:]), Bytes: modelBytes(m, n.cfg.Capacity),
		ServedContext: n.Attestation.ServedContext, PoolPages: n.Attestation.PoolPages}}
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	for _, id := range n.Server.Models()[1:] {
		if sv, ok := n.models.byID[id]; ok {
			out = append(out, sv.info())
		}
	}
	return out
}

// startModels runs the further models' engines (Start).
func (n *Node) startModels() {
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	n.models.started = true
	for _, sv := range n.models.byID {
		sv.run()
	}
}

// stopModels stops the further models' engines (StopEngine).
func (n *Node) stopModels() {
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	for _, sv := range n.models.byID {
		sv.stopEngine()
	}
}

// closeModels stops and closes every further model (Close).
func (n *Node) closeModels() {
	n.models.mu.Lock()
	all := n.models.byID
	n.models.byID = map[string]*served{}
	n.models.mu.Unlock()
	for _, sv := range all {
		sv.close()
	}
}
