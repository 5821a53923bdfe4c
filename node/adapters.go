package node

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/service"
)

// A node serves its tenants' LoRA adapters (api.AdapterAdmin): an admin
// registers an adapter file from the node's model directory for one tenant
// and one served model; requests of that tenant name it as
// "<model>:<name>". Each model has its own registry (engine.Adapters),
// dropped with the model.
//
// Ordering duties:
//   - adapter.registered (signed, under the tenant: never in the public
//     log) is ledgered BEFORE the adapter serves, adapter.unregistered
//     BEFORE it stops serving; when the ledger cannot record it the change
//     does not happen.
//   - Registrations outlive the node: at start (New) a node reads its
//     adapter.registered and adapter.unregistered events back from the
//     ledger and registers again each adapter still registered on it, for
//     the models it serves, from the recorded path — only when the event
//     is signed by one of Config.EventKeys (when set), the file's
//     SHA-256 is still the recorded digest and the model's is the recorded
//     model digest. Any other one (a missing or changed file, a model
//     changed or no longer served, a tenant gone or no longer allowed the
//     model) is not served, is logged at error level and opens an
//     automatic register entry of invariant adapter_restore:<cause>
//     (adapterIncident; not for a tenant gone or withdrawn the model):
//     never a silently different adapter.
//   - A replay of a request that ran under an adapter of the first model
//     (replayAdapter) loads, for the replay engine's instance, the adapter
//     of that digest the tenant holds now, from its file read again and
//     checked against the digest: never another adapter, never another
//     tenant's.

// Errors of the adapter operations.
var (
	// ErrAdapterPath: the path is not a .gguf file inside the model
	// directory.
	ErrAdapterPath = cloison.NewError(cloison.CodeInvalid, "path must name a .gguf file inside the node's model directory")
	// ErrAdapterFile: the file is not a LoRA adapter of the model.
	ErrAdapterFile = cloison.NewError(cloison.CodeInvalid, "the file does not load as a LoRA adapter of that model")
	// ErrAdapterTenant: no tenant of that id.
	ErrAdapterTenant = cloison.NewError(cloison.CodeNotFound, "no tenant of that id")
	// ErrAdapterModel: the tenant is not allowed the adapter's base model
	// (its allowed_models), so it could never use the adapter.
	ErrAdapterModel = cloison.NewError(cloison.CodeInvalid, "the tenant is not allowed that model; allow it first (allowed_models)")
)

// baseModel is the served model id's weights and digest.
func (n *Node) baseModel(id string) (Model, bool) {
	if id == n.cfg.Model.Name {
		return n.cfg.Model, true
	}
	n.models.mu.Lock()
	defer n.models.mu.Unlock()
	sv, ok := n.models.byID[id]
	if !ok {
		return Model{}, false
	}
	return sv.model, true
}

func (n *Node) adapterInfo(t cloison.TenantID, m Model, name string, ad *model.Adapter) api.AdapterInfo {
	return api.AdapterInfo{Tenant: t, Name: name, ID: m.Name + service.AdapterSep + name, Model: m.Name,
		Digest: hex.EncodeToString(ad.Digest[:]), ModelDigest: hex.EncodeToString(m.Digest[:]), Rank: ad.Rank, Alpha: ad.Alpha}
}

// RegisterAdapter loads req.Path from the node's model directory as a LoRA
// adapter of model req.Model ("": the node's first) and serves it to
// req.Tenant as "<model>:<req.Name>" (api.AdapterAdmin), once
// adapter.registered is ledgered.
//
// Errors: ErrNoModelDir, ErrAdapterPath, ErrAdapterTenant, ErrAdapterModel,
// api.ErrUnknownModel, engine.ErrAdapterName, engine.ErrAdapterExists,
// ErrAdapterFile, the ledger's.
func (n *Node) RegisterAdapter(ctx context.Context, actor audit.Name, req api.AdapterRegister) (api.AdapterInfo, error) {
	dir := n.cfg.ModelDir
	if dir == "" {
		return api.AdapterInfo{}, ErrNoModelDir
	}
	// The path is ledgered (a restarted node registers it again): an
	// identifier, never free text.
	if !filepath.IsLocal(req.Path) || !strings.HasSuffix(req.Path, ".gguf") || audit.CheckName("path", req.Path) != nil {
		return api.AdapterInfo{}, ErrAdapterPath
	}
	path := filepath.Join(dir, req.Path)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return api.AdapterInfo{}, ErrAdapterPath
	}
	if err := engine.CheckAdapterName(req.Name); err != nil {
		return api.AdapterInfo{}, err
	}
	t, err := n.cfg.Tenants.Tenant(ctx, req.Tenant)
	if err != nil {
		return api.AdapterInfo{}, ErrAdapterTenant.Withf("%.64q", req.Tenant)
	}
	id := req.Model
	if id == "" {
		id = n.cfg.Model.Name
	}
	// Loads and unloads wait for each other: the model stays served
	// until its adapter is registered.
	n.models.ops.Lock()
	defer n.models.ops.Unlock()
	m, ok := n.baseModel(id)
	reg, rok := n.Server.ModelAdapters(id)
	if !ok || !rok {
		return api.AdapterInfo{}, api.ErrUnknownModel.Withf("%.64q", id)
	}
	if !t.Allows(id) {
		// Nothing is loaded or ledgered: the tenant could never use it.
		return api.AdapterInfo{}, ErrAdapterModel.Withf("%.64q", id)
	}
	if _, err := reg.Lookup(req.Tenant, req.Name); err == nil {
		return api.AdapterInfo{}, engine.ErrAdapterExists.Withf("%q", req.Name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return api.AdapterInfo{}, ErrAdapterPath
	}
	ad, err := model.LoadAdapter(m.Model, data)
	if err != nil {
		n.log.Warn("adapter refused", "path", req.Path, "model", id, "err", err)
		return api.AdapterInfo{}, ErrAdapterFile
	}
	if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: req.Tenant, Actor: actor, Payload: audit.AdapterRegistered{
		Node: audit.Name(n.cfg.NodeName), Name: audit.Name(req.Name), Digest: audit.Digest(ad.Digest), Model: audit.Name(id),
		ModelDigest: audit.Digest(m.Digest), Rank: int64(ad.Rank), Actor: actor, Path: audit.Name(req.Path)}}); err != nil {
		ad.Close()
		return api.AdapterInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
	}
	if err := reg.Register(req.Tenant, req.Name, ad); err != nil {
		ad.Close() // unreachable: checked above under ops
		return api.AdapterInfo{}, err
	}
	n.adFiles.set(adapterKey{req.Tenant, id, req.Name}, req.Path)
	n.log.Info("adapter registered", "tenant", req.Tenant, "model", id, "name", req.Name, "digest", hex.EncodeToString(ad.Digest[:]), "by", actor)
	return n.adapterInfo(req.Tenant, m, req.Name, ad), nil
}

// ErrAdapterStore: an uploaded adapter could not be written into the
// node's model directory (read-only storage, a full disk).
var ErrAdapterStore = cloison.NewError(cloison.CodeUnavailable, "the adapter could not be stored on this node")

// ErrAdapterDigest: an uploaded adapter's SHA-256 is not the digest its
// client stated (a truncated or altered upload).
var ErrAdapterDigest = cloison.NewError(cloison.CodeInvalid, "the uploaded file's SHA-256 is not the digest stated (digest: 64 hex digits)")

// UploadAdapter registers a tenant's own adapter file (api.AdapterAdmin,
// POST /v1/adapters): its SHA-256 must be up.Digest, it must load as an
// adapter of model up.Model ("": the node's first, which the tenant must be
// allowed), and it is written into the model directory
// (adapters/<tenant>/<digest>.gguf, so that a restart restores it as any
// registration) before adapter.registered is ledgered with the tenant's
// subject as actor; it serves only after.
//
// Errors: ErrNoModelDir, engine.ErrAdapterName, ErrAdapterDigest,
// ErrAdapterTenant, api.ErrUnknownModel (a model not served or not the
// tenant's), engine.ErrAdapterExists, ErrAdapterFile, ErrAdapterStore,
// the ledger's.
func (n *Node) UploadAdapter(ctx context.Context, actor audit.Name, up api.AdapterUpload) (api.AdapterInfo, error) {
	dir := n.cfg.ModelDir
	if dir == "" {
		return api.AdapterInfo{}, ErrNoModelDir
	}
	if err := engine.CheckAdapterName(up.Name); err != nil {
		return api.AdapterInfo{}, err
	}
	sum := sha256.Sum256(up.Data)
	if want, err := hex.DecodeString(up.Digest); err != nil || len(want) != len(sum) || !bytes.Equal(want, sum[:]) {
		return api.AdapterInfo{}, ErrAdapterDigest
	}
	id := up.Model
	if id == "" {
		id = n.cfg.Model.Name
	}
	t, err := n.cfg.Tenants.Tenant(ctx, up.Tenant)
	if err != nil {
		return api.AdapterInfo{}, ErrAdapterTenant.Withf("%.64q", up.Tenant)
	}
	n.models.ops.Lock()
	defer n.models.ops.Unlock()
	m, ok := n.baseModel(id)
	reg, rok := n.Server.ModelAdapters(id)
	if !ok || !rok || !t.Allows(id) {
		return api.AdapterInfo{}, api.ErrUnknownModel.Withf("%.64q", id)
	}
	if _, err := reg.Lookup(up.Tenant, up.Name); err == nil {
		return api.AdapterInfo{}, engine.ErrAdapterExists.Withf("%q", up.Name)
	}
	ad, err := model.LoadAdapter(m.Model, up.Data)
	if err != nil {
		n.log.Warn("uploaded adapter refused", "tenant", up.Tenant, "model", id, "err", err)
		return api.AdapterInfo{}, ErrAdapterFile
	}
	rel := filepath.Join("adapters", string(up.Tenant), hex.EncodeToString(sum[:])+".gguf")
	if !filepath.IsLocal(rel) || audit.CheckName("path", rel) != nil {
		return api.AdapterInfo{}, ErrAdapterPath
	}
	created, err := writeAdapterFile(filepath.Join(dir, rel), up.Data)
	if err != nil {
		n.log.Error("uploaded adapter not written", "tenant", up.Tenant, "model", id, "err", err)
		return api.AdapterInfo{}, ErrAdapterStore
	}
	if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: up.Tenant, Actor: actor, Payload: audit.AdapterRegistered{
		Node: audit.Name(n.cfg.NodeName), Name: audit.Name(up.Name), Digest: audit.Digest(ad.Digest), Model: audit.Name(id),
		ModelDigest: audit.Digest(m.Digest), Rank: int64(ad.Rank), Actor: actor, Path: audit.Name(rel)}}); err != nil {
		if created {
			_ = os.Remove(filepath.Join(dir, rel))
		}
		return api.AdapterInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
	}
	if err := reg.Register(up.Tenant, up.Name, ad); err != nil {
		return api.AdapterInfo{}, err // unreachable: checked above under ops
	}
	n.adFiles.set(adapterKey{up.Tenant, id, up.Name}, rel)
	n.log.Info("adapter uploaded", "tenant", up.Tenant, "model", id, "name", up.Name, "digest", hex.EncodeToString(ad.Digest[:]), "by", actor)
	return n.adapterInfo(up.Tenant, m, up.Name, ad), nil
}

// writeAdapterFile writes data to path (mode 0600, its directories 0700)
// through a temporary file renamed into place, unless a file of the same
// contents is there already (created false).
func writeAdapterFile(path string, data []byte) (created bool, err error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".upload-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name()) // once renamed, a no-op
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(f.Name(), path)
}

// UnregisterAdapter stops serving tenant's adapter name of model ("": the
// node's first), once adapter.unregistered is ledgered (api.AdapterAdmin).
// Requests already running under it finish with it: its weights are freed
// when the last reference goes (the cpu backend's, the only one that loads
// adapters, are the garbage collector's).
//
// Errors: api.ErrUnknownModel (also for an adapter that is not the
// tenant's), the ledger's.
func (n *Node) UnregisterAdapter(ctx context.Context, actor audit.Name, tenant cloison.TenantID, id, name string) (api.AdapterInfo, error) {
	if id == "" {
		id = n.cfg.Model.Name
	}
	n.models.ops.Lock()
	defer n.models.ops.Unlock()
	m, ok := n.baseModel(id)
	reg, rok := n.Server.ModelAdapters(id)
	if !ok || !rok {
		return api.AdapterInfo{}, api.ErrUnknownModel.Withf("%.64q", id+service.AdapterSep+name)
	}
	ad, err := reg.Lookup(tenant, name)
	if err != nil {
		return api.AdapterInfo{}, api.ErrUnknownModel.Withf("%.64q", id+service.AdapterSep+name)
	}
	if _, err := n.cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: actor, Payload: audit.AdapterUnregistered{
		Node: audit.Name(n.cfg.NodeName), Name: audit.Name(name), Digest: audit.Digest(ad.Digest), Model: audit.Name(id), Actor: actor}}); err != nil {
		return api.AdapterInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
	}
	if _, err := reg.Unregister(tenant, name); err != nil {
		return api.AdapterInfo{}, err
	}
	n.adFiles.set(adapterKey{tenant, id, name}, "")
	n.log.Info("adapter unregistered", "tenant", tenant, "model", id, "name", name, "by", actor)
	return n.adapterInfo(tenant, m, name, ad), nil
}

// TenantAdapters are tenant's adapters of every served model
// (api.AdapterAdmin).
func (n *Node) TenantAdapters(tenant cloison.TenantID) []api.AdapterInfo {
	var out []api.AdapterInfo
	for _, id := range n.Server.Models() {
		reg, ok := n.Server.ModelAdapters(id)
		m, mok := n.baseModel(id)
		if !ok || !mok {
			continue
		}
		for _, a := range reg.List(tenant) {
			ad, err := reg.Lookup(tenant, a.Name)
			if err == nil {
				out = append(out, n.adapterInfo(tenant, m, a.Name, ad))
			}
		}
	}
	return out
}

// adapterKey is one registration: a tenant's adapter name of a model.
type adapterKey struct {
	tenant      cloison.TenantID
	model, name string
}

// restoreAdapters registers again the adapters the ledger holds as
// registered on this node (see the ordering duties above). An adapter that
// cannot be restored as it was registered is not served, logged, and —
// unless its tenant was withdrawn the model or removed, an admin's change
// already on the record — reported in the register (adapterIncident);
// only a ledger that cannot be read stops the node.
func (n *Node) restoreAdapters(ctx context.Context) error {
	if n.cfg.Ledger == nil {
		return nil
	}
	recs, err := n.cfg.Ledger.OfKinds(ctx, audit.KindAdapterRegistered, audit.KindAdapterUnregistered)
	if err != nil {
		return fmt.Errorf("adapters: %w", err)
	}
	node := audit.Name(n.cfg.NodeName)
	type registered struct {
		p   audit.AdapterRegistered
		seq int64
	}
	live := map[adapterKey]registered{}
	unsigned := map[adapterKey]int64{} // the seq of each key's last unsigned registration
	var order []adapterKey
	for _, r := range recs {
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			return fmt.Errorf("adapters: ledger entry %d: %w", r.Seq, err)
		}
		p, err := env.DecodePayload()
		if err != nil {
			return fmt.Errorf("adapters: ledger entry %d: %w", r.Seq, err)
		}
		switch p := p.(type) {
		case *audit.AdapterRegistered:
			if p.Node != node {
				continue
			}
			k := adapterKey{env.Tenant, string(p.Model), string(p.Name)}
			if len(n.cfg.EventKeys) > 0 {
				// A registration stated by whoever holds only the
				// database's credentials is not served.
				if kid, err := audit.VerifyEventSignature(r.Payload, n.cfg.EventKeys); err != nil || kid == "" {
					delete(live, k)
					unsigned[k] = int64(r.Seq)
					continue
				}
			}
			delete(unsigned, k) // registered again, signed
			live[k] = registered{*p, int64(r.Seq)}
			order = append(order, k)
		case *audit.AdapterUnregistered:
			if p.Node == node {
				k := adapterKey{env.Tenant, string(p.Model), string(p.Name)}
				delete(live, k)
				delete(unsigned, k)
			}
		}
	}
	// Unsigned registrations still standing (not unregistered nor
	// registered again since) are reported; the others served nothing.
	for _, k := range slices.SortedFunc(maps.Keys(unsigned), compareAdapterKeys) {
		n.log.Error("adapter not restored: not served until an admin registers it again", "tenant", k.tenant, "model", k.model,
			"name", k.name, "reason", "its ledger entry carries no valid signature by the node's log keys", "seq", unsigned[k])
		n.adapterIncident(ctx, k, unsigned[k], restoreSignature)
	}
	for _, k := range order {
		reg, ok := live[k]
		if !ok {
			continue
		}
		p := reg.p
		delete(live, k) // a key registered twice is restored once
		if cause, err := n.restoreAdapter(ctx, k, p); err != nil {
			n.log.Error("adapter not restored: not served until an admin registers it again", "tenant", k.tenant, "model", k.model,
				"name", k.name, "digest", hex.EncodeToString(p.Digest[:]), "path", string(p.Path), "reason", err, "cause", string(cause))
			if cause != restoreTenant {
				n.adapterIncident(ctx, k, reg.seq, cause)
			}
			continue
		}
		n.log.Info("adapter restored", "tenant", k.tenant, "model", k.model, "name", k.name, "digest", hex.EncodeToString(p.Digest[:]))
	}
	return nil
}

func compareAdapterKeys(a, b adapterKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.model, b.model), cmp.Compare(a.name, b.name))
}

// Why an adapter was not restored at start: the register entry's invariant
// is "adapter_restore:" and the cause.
const (
	restoreSignature      audit.Name = "signature"        // its registration is not signed by the node's log keys
	restorePath           audit.Name = "path"             // no path recorded, no model directory, or a path outside it
	restoreFileUnreadable audit.Name = "file_unreadable"  // missing or unreadable
	restoreFileChanged    audit.Name = "file_changed"     // its SHA-256 is not the registered digest
	restoreFileInvalid    audit.Name = "file_invalid"     // it no longer loads as an adapter of the model
	restoreModelNotServed audit.Name = "model_not_served" // the node does not serve its model
	restoreModelChanged   audit.Name = "model_changed"    // the model's digest is not the one it was registered for
	restoreTenant         audit.Name = "tenant"           // its tenant is gone or no longer allowed the model (no register entry)
)

// adapterIncident reports in the register that tenant k's adapter,
// registered by ledger entry seq, was not restored for cause: an automatic
// detection of invariant adapter_restore:<cause> (as the node reports a row
// or a tree that is not what the ledger states), naming the tenant, the
// registration's ledger entry and the model — identifiers only. Detections
// of one cause and model at one start join one entry. A register that
// cannot be written is logged: the adapter is not served either way.
func (n *Node) adapterIncident(ctx context.Context, k adapterKey, seq int64, cause audit.Name) {
	now := time.Now()
	d := audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "adapter_restore:" + cause, DetectedAt: now, PeriodStart: now, PeriodEnd: now,
		AffectedTenants: []cloison.TenantID{k.tenant}, LedgerEvents: []int64{seq}, Model: audit.Name(service.SanitizeName(k.model))}
	id, err := n.cfg.Ledger.OpenFromDetection(ctx, n.cfg.Actor, d)
	if err != nil {
		n.log.Error("adapter not restored: the register entry could not be opened", "tenant", k.tenant, "model", k.model, "name", k.name, "cause", string(cause), "err", err)
		return
	}
	n.log.Warn("adapter not restored: incident opened", "incident", id, "tenant", k.tenant, "model", k.model, "name", k.name, "cause", string(cause))
}

// restoreAdapter registers the adapter p records, unchanged, or says why
// not (the cause and the reason for the log).
func (n *Node) restoreAdapter(ctx context.Context, k adapterKey, p audit.AdapterRegistered) (audit.Name, error) {
	if p.Path == "" {
		return restorePath, errors.New("its registration records no path")
	}
	if n.cfg.ModelDir == "" {
		return restorePath, errors.New("the node has no model directory")
	}
	m, ok := n.baseModel(k.model)
	reg, rok := n.Server.ModelAdapters(k.model)
	if !ok || !rok {
		return restoreModelNotServed, errors.New("the node does not serve its model")
	}
	if audit.Digest(m.Digest) != p.ModelDigest {
		return restoreModelChanged, errors.New("the model's digest is not the one it was registered for")
	}
	t, err := n.cfg.Tenants.Tenant(ctx, k.tenant)
	if err != nil || !t.Allows(k.model) {
		return restoreTenant, errors.New("its tenant is gone or no longer allowed the model")
	}
	if !filepath.IsLocal(string(p.Path)) {
		return restorePath, errors.New("its path is not inside the model directory")
	}
	data, err := os.ReadFile(filepath.Join(n.cfg.ModelDir, string(p.Path)))
	if err != nil {
		return restoreFileUnreadable, errors.New("its file cannot be read")
	}
	if audit.Digest(sha256.Sum256(data)) != p.Digest {
		return restoreFileChanged, errors.New("its file changed since it was registered (digest)")
	}
	ad, err := model.LoadAdapter(m.Model, data)
	if err != nil {
		return restoreFileInvalid, fmt.Errorf("its file does not load: %v", err)
	}
	if audit.Digest(ad.Digest) != p.Digest {
		ad.Close()
		return restoreFileChanged, errors.New("its file changed since it was registered (digest)")
	}
	if err := reg.Register(k.tenant, k.name, ad); err != nil {
		ad.Close()
		return restoreFileInvalid, err
	}
	n.adFiles.set(k, string(p.Path))
	return "", nil
}

// adapterFiles are the registered adapters' paths in the model directory
// (what a replay loads again).
type adapterFiles struct {
	mu   sync.Mutex
	path map[adapterKey]string // guarded by mu
}

// set records k's path ("": k is no longer registered).
func (f *adapterFiles) set(k adapterKey, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == nil {
		f.path = map[adapterKey]string{}
	}
	if path == "" {
		delete(f.path, k)
		return
	}
	f.path[k] = path
}

func (f *adapterFiles) get(k adapterKey) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.path[k]
	return p, ok
}

// replayAdapter is the replay engine's service.ResponseConfig.ReplayAdapter:
// tenant's adapter of the node's first model (the replay engine's model)
// whose digest is digest, loaded for the replay engine's own instance from
// its registered file — only while tenant holds such an adapter
// (service.ErrReplayAdapterGone otherwise: unregistered, registered again
// from another file, or another tenant's) and while the file still has
// that digest (service.ErrReplayAdapterChanged).
func (n *Node) replayAdapter(_ context.Context, tenant cloison.TenantID, digest audit.Digest) (*model.Adapter, error) {
	id := n.cfg.Model.Name
	reg, ok := n.Server.ModelAdapters(id)
	rep := n.cfg.API.Responses.Replay
	if !ok || rep == nil {
		return nil, service.ErrReplayAdapterGone
	}
	name := ""
	for _, a := range reg.List(tenant) { // tenant's own adapters only
		if audit.Digest(a.Digest) == digest {
			name = a.Name
			break
		}
	}
	path, ok := n.adFiles.get(adapterKey{tenant, id, name})
	if name == "" || !ok || n.cfg.ModelDir == "" {
		return nil, service.ErrReplayAdapterGone
	}
	data, err := os.ReadFile(filepath.Join(n.cfg.ModelDir, path))
	if err != nil || audit.Digest(sha256.Sum256(data)) != digest {
		return nil, service.ErrReplayAdapterChanged
	}
	return model.LoadAdapter(rep.Model(), data)
}
