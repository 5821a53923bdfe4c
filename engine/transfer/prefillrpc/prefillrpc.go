// Package prefillrpc carries remote prefill between the nodes of a split
// deployment: a decode node's engine.Remote.Prefill becomes a PrefillService
// call (Client), and a prefill node serves it by running
// engine.PrefillRunner.Prefill with a transfer.GRPC dialer to the decode
// node's transfer server (Server). Both directions run over mutual TLS.
//
// A prefill node may serve several models (Server.AddModel), each with its
// own attestation and prefill: Attest and Prefill name the model by the
// digest of its file (empty: the node's first), one it does not serve is
// refused (ErrUnknownModel, not_found) and never served by another; the
// decode side asks for each of its models (Client.Attest with a digest,
// Client.PrefillModel).
//
// A prefill node dials only decode addresses it trusts: those TrustDecode
// lists (cloisond --decode-peers), or else an address whose host the calling
// decode node's certificate names; any other is refused (permission_denied)
// before anything is dialed. cloisond's TLS configs also bind certificates to
// roles (pki.RequirePeerRole): only a decode-role certificate calls
// PrefillService, and only a prefill-role one serves it.
//
// Errors keep their cloison code across the wire: the server answers with
// rpcerr.Status (the one error table, shared with the public API), which
// carries the code as a google.rpc.ErrorInfo detail and only the public
// message as text, and the
// client turns it back into a *cloison.Error of that code. No side parses
// message text.
package prefillrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	prefillv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/prefill/v1"
	"github.com/cloison/cloison/internal/rpcerr"
)

// PrefillFunc is engine.PrefillRunner.Prefill with its dialer chosen per call.
type PrefillFunc func(ctx context.Context, d transfer.Dialer, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, target transfer.Target) error

// Server is the prefill node's PrefillService.
type Server struct {
	prefillv1.UnimplementedPrefillServiceServer
	prefill PrefillFunc
	tls     *tls.Config // client config for dialing decode nodes (mTLS)
	// Before, if set, runs before each prefill (e.g. to add a tenant created
	// since the node started to its pool).
	before func(ctx context.Context, tenant cloison.TenantID) error

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn // decode node address → connection
	att     *prefillv1.Attestation      // guarded by mu; nil until SetAttestation
	trusted map[string]bool             // guarded by mu; TrustDecode's addresses, nil: attested by the caller's certificate
	// models: guarded by mu; the further models (AddModel) by digest,
	// each with its own attestation and prefill.
	models map[string]model
}

// model is one further model a Server prefills with.
type model struct {
	att     *prefillv1.Attestation
	prefill PrefillFunc
}

// ErrUnknownModel: an Attest or Prefill named a model (digest) this node
// does not serve (code not_found). A decode node refuses that model for
// split requests (attest.Prefill), never falls back to another.
var ErrUnknownModel = cloison.NewError(cloison.CodeNotFound, "prefill: this node does not serve that model")

// ErrUntrustedDecode: a PrefillRequest named a decode address this node does
// not dial (code permission_denied).
var ErrUntrustedDecode = cloison.NewError(cloison.CodePermissionDenied, "prefill: decode address not trusted")

// TrustDecode restricts the decode addresses (host:port, as PrefillRequest
// names them) this node dials to addrs. Without it a decode address is
// trusted only if its host is named (IP or DNS SAN) in the certificate of the
// decode node that asks: the CA attests where that node lives, so a caller
// cannot point this node at another host.
func (s *Server) TrustDecode(addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trusted = map[string]bool{}
	for _, a := range addrs {
		s.trusted[a] = true
	}
}

// trust checks addr against TrustDecode's list or the caller's certificate.
func (s *Server) trust(ctx context.Context, addr string) error {
	s.mu.Lock()
	trusted := s.trusted
	s.mu.Unlock()
	if trusted != nil {
		if !trusted[addr] {
			return fmt.Errorf("%w: %q is not in --decode-peers", ErrUntrustedDecode, addr)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("%w: %q is not host:port", ErrUntrustedDecode, addr)
	}
	p, ok := peer.FromContext(ctx)
	var leaf *x509.Certificate
	if ok {
		if ti, isTLS := p.AuthInfo.(credentials.TLSInfo); isTLS && len(ti.State.PeerCertificates) > 0 {
			leaf = ti.State.PeerCertificates[0]
		}
	}
	if leaf == nil {
		return fmt.Errorf("%w: the caller presented no certificate", ErrUntrustedDecode)
	}
	if leaf.VerifyHostname(host) != nil {
		return fmt.Errorf("%w: the caller's certificate does not name %q", ErrUntrustedDecode, host)
	}
	return nil
}

// SetAttestation publishes this node's capacity attestation and the hex
// SHA-256 of the model file it serves (its first model: an Attest or
// Prefill that names no model is this one's), for Attest.
func (s *Server) SetAttestation(a attest.Attestation, modelDigest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.att = wireAttestation(a, modelDigest)
}

// AddModel serves a further model: its attestation (its own pool) and the
// prefill that computes with it, chosen by a request naming modelDigest.
// Errors: ErrInvalid-coded (a digest already served, or empty).
func (s *Server) AddModel(a attest.Attestation, modelDigest string, fn PrefillFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.models[modelDigest]; dup || modelDigest == "" || (s.att != nil && s.att.GetModelDigest() == modelDigest) {
		return cloison.NewError(cloison.CodeInvalid, "prefill: model served twice").Withf("%.16s", modelDigest)
	}
	s.models[modelDigest] = model{att: wireAttestation(a, modelDigest), prefill: fn}
	return nil
}

func wireAttestation(a attest.Attestation, modelDigest string) *prefillv1.Attestation {
	return &prefillv1.Attestation{ModelDigest: modelDigest, ModelContext: int64(a.ModelContext), ServedContext: int64(a.ServedContext),
		PoolTokens: int64(a.PoolTokens), PoolPages: int64(a.PoolPages), PageTokens: int64(a.PageTokens), K: int64(a.K),
		Zeroing: a.Zeroing, Ok: a.OK, Reason: a.Reason, Region: a.Labels.Region, Tier: a.Labels.Tier, KvType: a.KVType}
}

// model returns the attestation and prefill of the model digest names
// ("": the first). Errors: ErrUnknownModel, unavailable before
// SetAttestation.
func (s *Server) model(digest string) (*prefillv1.Attestation, PrefillFunc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.models[digest]; ok {
		return m.att, m.prefill, nil
	}
	if digest != "" && (s.att == nil || digest != s.att.GetModelDigest()) {
		return nil, nil, ErrUnknownModel
	}
	return s.att, s.prefill, nil // the first model's (its attestation nil before SetAttestation)
}

// Attest implements PrefillService: the attestation of the model the
// request names (its digest; empty: the first).
func (s *Server) Attest(_ context.Context, in *prefillv1.AttestRequest) (*prefillv1.Attestation, error) {
	a, _, err := s.model(in.GetModelDigest())
	if err == nil && a == nil {
		err = cloison.NewError(cloison.CodeUnavailable, "prefill: no capacity attestation published")
	}
	if err != nil {
		return nil, statusError(err)
	}
	return a, nil
}

// NewServer returns a Server that runs prefill, dialing decode nodes with
// clientTLS (a pki.ClientConfig; its ServerName is set per address). before
// may be nil.
func NewServer(prefill PrefillFunc, clientTLS *tls.Config, before func(context.Context, cloison.TenantID) error) *Server {
	return &Server{prefill: prefill, tls: clientTLS, before: before, conns: map[string]*grpc.ClientConn{}, models: map[string]model{}}
}

// Register registers s on g.
func Register(g *grpc.Server, s *Server) { prefillv1.RegisterPrefillServiceServer(g, s) }

// Close closes the connections to decode nodes.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, c := range s.conns {
		_ = c.Close()
		delete(s.conns, a)
	}
}

func (s *Server) conn(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[addr]; ok {
		return c, nil
	}
	c, err := Dial(addr, s.tls)
	if err != nil {
		return nil, err
	}
	s.conns[addr] = c
	return c, nil
}

// Dial opens a mutual-TLS connection to addr with base (a pki.ClientConfig),
// verifying the peer's certificate against addr's host.
func Dial(addr string, base *tls.Config) (*grpc.ClientConn, error) {
	cfg := base.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		cfg.ServerName = host
	}
	return grpc.NewClient(addr, transfer.DialOptions(cfg)...)
}

// Prefill implements PrefillService.
func (s *Server) Prefill(ctx context.Context, in *prefillv1.PrefillRequest) (*prefillv1.PrefillResponse, error) {
	t := in.GetTarget()
	if t == nil || len(t.GetReservation()) != len(transfer.ReservationID{}) || in.GetDecodeAddr() == "" || in.GetTenant() == "" || in.GetRequest() == "" {
		return nil, statusError(cloison.NewError(cloison.CodeInvalid, "prefill: incomplete request (tenant, request, target and decode_addr are required)"))
	}
	target := transfer.Target{Tenant: cloison.TenantID(t.GetTenant()), Request: cloison.RequestID(t.GetRequest()), Epoch: t.GetEpoch(), Tokens: int(t.GetTokens())}
	copy(target.Reservation[:], t.GetReservation())
	tenant := cloison.TenantID(in.GetTenant())
	// A model this node does not serve is refused before anything is
	// computed or dialled: never prefilled with another model.
	_, prefill, err := s.model(in.GetModelDigest())
	if err != nil {
		return nil, statusError(err)
	}
	if s.before != nil {
		if err := s.before(ctx, tenant); err != nil {
			return nil, statusError(err)
		}
	}
	// Dial only where this node was told to, or where the caller's
	// certificate says it lives: never an address a request alone names.
	if err := s.trust(ctx, in.GetDecodeAddr()); err != nil {
		return nil, statusError(err)
	}
	conn, err := s.conn(in.GetDecodeAddr())
	if err != nil {
		return nil, statusError(&cloison.Error{Code: cloison.CodeUnavailable, Message: "prefill: decode node unreachable", Cause: err})
	}
	if err := prefill(ctx, transfer.GRPC(conn), tenant, cloison.RequestID(in.GetRequest()), in.GetTokens(), target); err != nil {
		return nil, statusError(err)
	}
	return &prefillv1.PrefillResponse{Tokens: int64(len(in.GetTokens()))}, nil
}

// Client is the decode node's side: Prefill is an engine.Remote.Prefill that
// asks the prefill nodes, round-robin, and tells them to send to Advertise.
//
// The set of nodes asked may change while serving (SetPeers: cloisond's DNS
// watcher); a node is only ever added by the caller after it attested
// (AttestPeer), so no request reaches a node that was not attested.
type Client struct {
	advertise string
	tls       *tls.Config
	next      atomic.Uint64

	mu     sync.RWMutex
	conns  map[string]*grpc.ClientConn // guarded by mu: every address dialled and not dropped
	active []peerClient                // guarded by mu: the nodes Prefill asks, in order
	// labels: guarded by mu; every address's labels as its last attestation
	// (AttestPeer) stated them. An address SetPeers keeps without one has
	// none, and so serves no tenant with a residency requirement.
	labels map[string]attest.Labels
	// residency, set once before serving (SetResidency): a tenant's
	// allowed regions and required tier; nil: no tenant has one.
	residency func(ctx context.Context, t cloison.TenantID) (regions []string, tier string, err error)

	smu    sync.Mutex
	served map[cloison.RequestID]servedBy // guarded by smu: which node prefilled a request, until Served takes it
}

type peerClient struct {
	addr   string
	labels attest.Labels // as of the call that returned it (compliant)
	cl     prefillv1.PrefillServiceClient
}

// servedBy is the node that prefilled a request.
type servedBy struct {
	node attest.PrefillNode
	at   time.Time
}

// servedTTL bounds how long an untaken Served record is kept (a request
// whose completion was never recorded).
const servedTTL = 10 * time.Minute

// NewClient connects (lazily) to the prefill nodes at peers with clientTLS (a
// pki.ClientConfig). advertise is this decode node's transfer server address
// as the prefill nodes must dial it.
func NewClient(peers []string, advertise string, clientTLS *tls.Config) (*Client, error) {
	if len(peers) == 0 || advertise == "" {
		return nil, errors.New("prefillrpc: at least one prefill peer and the transfer address are required")
	}
	c := &Client{advertise: advertise, tls: clientTLS, conns: map[string]*grpc.ClientConn{}, labels: map[string]attest.Labels{},
		served: map[cloison.RequestID]servedBy{}}
	if err := c.SetPeers(peers); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// conn returns the connection to addr, dialling it once. Call with mu held.
func (c *Client) connLocked(addr string) (*grpc.ClientConn, error) {
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	conn, err := Dial(addr, c.tls)
	if err != nil {
		return nil, fmt.Errorf("prefill peer %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}

// SetPeers makes addrs the nodes Prefill asks (each must have attested:
// the caller's duty) and closes the connections to every other address.
func (c *Client) SetPeers(addrs []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	active := make([]peerClient, 0, len(addrs))
	keep := map[string]bool{}
	for _, a := range addrs {
		conn, err := c.connLocked(a)
		if err != nil {
			return err
		}
		keep[a] = true
		active = append(active, peerClient{addr: a, cl: prefillv1.NewPrefillServiceClient(conn)})
	}
	for a, conn := range c.conns {
		if !keep[a] {
			_ = conn.Close()
			delete(c.conns, a)
			delete(c.labels, a)
		}
	}
	c.active = active
	return nil
}

// Peers returns the addresses Prefill asks now.
func (c *Client) Peers() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, len(c.active))
	for i, p := range c.active {
		out[i] = p.addr
	}
	return out
}

// AttestPeer fetches the capacity attestation of the prefill node at addr
// (dialled if new; SetPeers closes it again if it is not kept) for its
// first model. Errors: the node's, through FromStatus.
func (c *Client) AttestPeer(ctx context.Context, addr string) (attest.PrefillPeer, error) {
	return c.AttestModel(ctx, addr, "")
}

// AttestModel fetches the capacity attestation of the prefill node at addr
// for the model of digest modelDigest (hex; "": its first). A node that
// does not serve it answers ErrUnknownModel's code (not_found): the caller
// marks the peer failed for that model (attest.Prefill). Errors: the
// node's, through FromStatus.
func (c *Client) AttestModel(ctx context.Context, addr, modelDigest string) (attest.PrefillPeer, error) {
	c.mu.Lock()
	conn, err := c.connLocked(addr)
	c.mu.Unlock()
	if err != nil {
		return attest.PrefillPeer{}, err
	}
	var from peer.Peer
	a, err := prefillv1.NewPrefillServiceClient(conn).Attest(ctx, &prefillv1.AttestRequest{ModelDigest: modelDigest}, grpc.Peer(&from))
	if err != nil {
		return attest.PrefillPeer{}, fmt.Errorf("prefill node %s: attestation: %w", addr, FromStatus(err))
	}
	// The labels its certificate names, signed by the CA: the node must
	// attest exactly these (attest.Prefill).
	var certified *attest.Labels
	if ti, ok := from.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
		l, err := pki.LabelsOf(ti.State.PeerCertificates[0])
		if err != nil {
			return attest.PrefillPeer{}, fmt.Errorf("prefill node %s: %w", addr, err)
		}
		certified = &attest.Labels{Region: l.Region, Tier: l.Tier}
	}
	p := attest.PrefillPeer{Addr: addr, ModelDigest: a.GetModelDigest(), Attestation: attest.Attestation{
		ModelContext: int(a.GetModelContext()), ServedContext: int(a.GetServedContext()), PoolTokens: int(a.GetPoolTokens()),
		PoolPages: int(a.GetPoolPages()), PageTokens: int(a.GetPageTokens()), K: int(a.GetK()), Zeroing: a.GetZeroing(),
		OK: a.GetOk(), Reason: a.GetReason(), Labels: attest.Labels{Region: a.GetRegion(), Tier: a.GetTier()}, KVType: a.GetKvType()},
		Certified: certified}
	// Only labels its certificate names count: a node that attests others
	// (and fails attest.Prefill) serves no tenant with a residency even if
	// a caller kept it.
	var l attest.Labels
	if certified != nil && *certified == p.Attestation.Labels {
		l = p.Attestation.Labels
	}
	c.mu.Lock()
	c.labels[addr] = l
	c.mu.Unlock()
	return p, nil
}

// Attest fetches every prefill node's capacity attestation for the model
// of digest modelDigest (hex; "": each node's first), for attest.Prefill
// to check. A node that does not serve that model is returned with no
// digest (attest.Prefill fails it: "does not serve this model"); one that
// cannot be reached, or has no attestation, is an error.
func (c *Client) Attest(ctx context.Context, modelDigest string) ([]attest.PrefillPeer, error) {
	addrs := c.Peers()
	peers := make([]attest.PrefillPeer, len(addrs))
	for i, a := range addrs {
		p, err := c.AttestModel(ctx, a, modelDigest)
		if cloison.ErrorCode(err) == cloison.CodeNotFound {
			p, err = attest.PrefillPeer{Addr: a}, nil // attest.Prefill refuses it
		}
		if err != nil {
			return nil, err
		}
		peers[i] = p
	}
	return peers, nil
}

// Close closes the connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, a)
	}
	c.active = nil
}

// ErrNoPrefillNode: no attested prefill node is in the set (all dropped).
var ErrNoPrefillNode = cloison.NewError(cloison.CodeUnavailable, "no prefill node available")

// ErrNoCompliantPrefill: the set holds no prefill node whose labels the
// tenant's residency allows (code permission_denied). The prompt goes
// nowhere: there is no fallback to a node outside the residency.
var ErrNoCompliantPrefill = cloison.NewError(cloison.CodePermissionDenied, "no prefill node in the regions and tier this tenant's residency allows")

// SetResidency sets where a tenant's prompts may be prefilled: fn returns
// the tenant's allowed regions (empty: any) and required node tier (empty:
// any); an error refuses the prefill. Call it before serving.
func (c *Client) SetResidency(fn func(ctx context.Context, t cloison.TenantID) (regions []string, tier string, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.residency = fn
}

// compliant returns the nodes of the set that may prefill tenant's prompts.
func (c *Client) compliant(ctx context.Context, tenant cloison.TenantID) ([]peerClient, error) {
	c.mu.RLock()
	active, residency := slices.Clone(c.active), c.residency
	for i := range active {
		active[i].labels = c.labels[active[i].addr]
	}
	c.mu.RUnlock()
	if len(active) == 0 {
		return nil, ErrNoPrefillNode
	}
	if residency == nil {
		return active, nil
	}
	regions, tier, err := residency(ctx, tenant)
	if err != nil {
		return nil, &cloison.Error{Code: cloison.CodeUnavailable, Message: "prefill: the tenant's residency could not be read", Cause: err}
	}
	var ok []peerClient
	for _, p := range active {
		if p.labels.Serves(regions, tier) {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return nil, ErrNoCompliantPrefill
	}
	return ok, nil
}

// Compliant reports whether the set holds a prefill node that may prefill
// tenant's prompts: nil, ErrNoPrefillNode, ErrNoCompliantPrefill or the
// residency lookup's error (admission asks it before the engine does).
func (c *Client) Compliant(ctx context.Context, tenant cloison.TenantID) error {
	_, err := c.compliant(ctx, tenant)
	return err
}

// PrefillLabels returns the labels of the nodes Prefill asks now, in order.
func (c *Client) PrefillLabels() []attest.Labels {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]attest.Labels, len(c.active))
	for i, p := range c.active {
		out[i] = c.labels[p.addr]
	}
	return out
}

// Served returns, once, the prefill node req's prompt was last sent to
// (false when none was: a one-token prompt, no compliant node, or already
// taken).
func (c *Client) Served(req cloison.RequestID) (attest.PrefillNode, bool) {
	c.smu.Lock()
	defer c.smu.Unlock()
	s, ok := c.served[req]
	delete(c.served, req)
	return s.node, ok
}

func (c *Client) recordServed(req cloison.RequestID, p peerClient) {
	now := time.Now()
	c.smu.Lock()
	defer c.smu.Unlock()
	for r, s := range c.served {
		if now.Sub(s.at) > servedTTL {
			delete(c.served, r)
		}
	}
	c.served[req] = servedBy{node: attest.PrefillNode{Addr: p.addr, Labels: p.labels}, at: now}
}

// Prefill asks the next prefill node that the tenant's residency allows
// (SetResidency); none in the set ⇒ ErrNoCompliantPrefill, and nothing is
// sent. A node that cannot be connected to is skipped for the next
// compliant one; any other failure is the request's: the decode node's
// reservation is single-use, so the engine fails the request closed.
func (c *Client) Prefill(ctx context.Context, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
	return c.prefill(ctx, "", tenant, req, tokens, to)
}

// PrefillModel is Prefill with the model of digest modelDigest (hex): the
// engine.Remote.Prefill of a decode node's further model. Every node of
// the set serves it (the decode node attested each for it, AttestModel).
func (c *Client) PrefillModel(modelDigest string) func(ctx context.Context, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
	return func(ctx context.Context, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
		return c.prefill(ctx, modelDigest, tenant, req, tokens, to)
	}
}

func (c *Client) prefill(ctx context.Context, modelDigest string, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
	in := &prefillv1.PrefillRequest{Tenant: string(tenant), Request: string(req), Tokens: tokens, DecodeAddr: c.advertise, ModelDigest: modelDigest,
		Target: &prefillv1.Target{Tenant: string(to.Tenant), Request: string(to.Request), Epoch: to.Epoch, Reservation: to.Reservation[:], Tokens: int64(to.Tokens)}}
	active, err := c.compliant(ctx, tenant)
	if err != nil {
		return err
	}
	start := c.next.Add(1)
	for i := range active {
		p := active[(int(start)+i)%len(active)]
		// Recorded BEFORE the call: the decode node may finish the
		// request (and ledger where it went) as soon as the transfer
		// commits, before this call returns. A node that was asked holds
		// the prompt whether or not it answers; the next one asked
		// replaces it.
		c.recordServed(req, p)
		_, err = p.cl.Prefill(ctx, in)
		if err == nil {
			return nil
		}
		if !unreachable(err) || ctx.Err() != nil {
			break
		}
	}
	return FromStatus(err)
}

// unreachable reports a transport failure — the connection could not be made
// or broke (a killed node) — as opposed to the prefill node's own answer,
// which carries its cloison code as an ErrorInfo detail. Trying another peer
// is then safe for isolation: if the dead node had begun streaming into the
// reservation, the decode node's receiver already refused that reservation,
// so the retry's transfer is refused too (fail closed), never mixed in.
func unreachable(err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	_, answered := rpcerr.Code(err)
	return !answered
}

// FromStatus turns a PrefillService status back into a cloison error of the
// code its ErrorInfo detail names; other statuses (no detail: the transport,
// or a peer that is not Cloison) become canceled, deadline_exceeded or
// unavailable errors whose message is fixed and whose cause is the status
// (transport text names addresses: private). A coded answer's message is
// kept after "prefill node: ": it is the peer's public message.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if code, ok := rpcerr.Code(err); ok {
		return &cloison.Error{Code: code, Message: "prefill node: " + st.Message()}
	}
	switch st.Code() {
	case codes.Canceled:
		return &cloison.Error{Code: cloison.CodeCanceled, Message: "prefill node: canceled", Cause: err}
	case codes.DeadlineExceeded:
		return &cloison.Error{Code: cloison.CodeDeadlineExceeded, Message: "prefill node: deadline exceeded", Cause: err}
	}
	return &cloison.Error{Code: cloison.CodeUnavailable, Message: "prefill node: unreachable", Cause: err}
}

// statusError is err as the gRPC status the public API would answer it
// with (rpcerr.Error), its cause logged as the API logs it: at level Error
// for a server-side failure, at Debug when a refusal's text says more than
// its public message. nil for nil.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	code, w, msg := rpcerr.Describe(err)
	switch {
	case w.HTTP >= 500:
		slog.Error("request failed", "code", code, "cause", err.Error())
	case err.Error() != msg:
		slog.Debug("request refused", "code", code, "cause", err.Error())
	}
	return rpcerr.Error(err)
}
