package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
//   - Registrations last the node's lifetime: a restarted node serves no
//     adapter until an admin registers it again (the ledger holds what was
//     registered, with digests, for that).

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
	if !filepath.IsLocal(req.Path) || !strings.HasSuffix(req.Path, ".gguf") {
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
		ModelDigest: audit.Digest(m.Digest), Rank: int64(ad.Rank), Actor: actor}}); err != nil {
		ad.Close()
		return api.AdapterInfo{}, fmt.Errorf("%w: %v", api.ErrLedgerUnavailable, err)
	}
	if err := reg.Register(req.Tenant, req.Name, ad); err != nil {
		ad.Close() // unreachable: checked above under ops
		return api.AdapterInfo{}, err
	}
	n.log.Info("adapter registered", "tenant", req.Tenant, "model", id, "name", req.Name, "digest", hex.EncodeToString(ad.Digest[:]), "by", actor)
	return n.adapterInfo(req.Tenant, m, req.Name, ad), nil
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
