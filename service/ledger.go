package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
)

// What the request path uses of the engine and the ledger, declared here
// where it is used (the implementations are *engine.Engine and
// *postgres.Store). A request's tenant crosses into the engine once, through
// EnsureTenant; the service holds no KV pool.

// Engine is what the request path asks of the inference engine
// (*engine.Engine).
type Engine interface {
	// Attestation is the capacity attestation the engine serves under.
	Attestation() attest.Attestation
	// Check and Submit: engine.Engine's, reject before allocate.
	Check(engine.GenerateRequest) error
	Submit(context.Context, engine.GenerateRequest) (*engine.Stream, error)
	// PrefixCache reports whether prompts are looked up in a prefix
	// cache: runChoices then staggers a request's choices so that they
	// share the prompt's pages.
	PrefixCache() bool
	// RankProbability is a Rank request's relevance probability from the
	// outputs its stream carried (engine.Engine.RankProbability).
	RankProbability(outputs []float32) float64
	// EnsureTenant reaches the tenant's KV partition (created now for a
	// tenant added since the node started); TenantIsolation reads it
	// without creating it.
	EnsureTenant(isolation.TenantConfig) (isolation.Partition, error)
	TenantIsolation(cloison.TenantID) (isolation.Partition, error)
}

// Placement is a decode node's view of its prefill nodes
// (*prefillrpc.Client), for residency: the policy sees the prefill nodes a
// prompt may be sent to before the request is admitted, and the ledger
// records which node prefilled it.
type Placement interface {
	// PrefillLabels are the labels of the prefill nodes asked now.
	PrefillLabels() []attest.Labels
	// Served returns, once, the prefill node that prefilled req.
	Served(req cloison.RequestID) (attest.PrefillNode, bool)
}

// Recorder is the ledger on the request path: events staged durably
// (Stage: what a request waits for before its answer) or appended with
// their position (Append: for events whose seq is recorded, e.g. in an
// incident), the head for readiness, incidents opened from detections,
// and the signed receipt of an entry it wrote (Receipt: audit.Receipt,
// encoded; an error when the log key cannot sign).
type Recorder interface {
	Append(ctx context.Context, e audit.Event) (audit.Record, error)
	Stage(ctx context.Context, e audit.Event) (audit.Record, error)
	Receipt(rec audit.Record, request cloison.RequestID) (string, error)
	Head(ctx context.Context) (audit.Head, error)
	OpenFromDetection(ctx context.Context, actor audit.Name, d audit.Detection) (audit.Name, error)
}

// Ledger is all the service asks of the audit ledger (*postgres.Store),
// the sum of what each part declares: the request path's Recorder, the
// compliance operations' RegisterStore, LedgerReader and TransparencyLog,
// and the response operations' Served. The assembly hands one store to
// every part through it.
type Ledger interface {
	Recorder
	RegisterStore
	LedgerReader
	TransparencyLog
	Served
}

var _ Engine = (*engine.Engine)(nil)

const attrKind = attribute.Key("cloison.ledger_kind")

// Append writes an event to the ledger within Config.LedgerTimeout and
// returns it with its seq. The write outlives ctx's cancellation (a client
// that went away does not unwrite what it caused), not its values.
//
// Errors: ErrLedgerUnavailable (503): the platform does not serve
// unaudited.
func (s *Requests) Append(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error) {
	return s.record(ctx, tenant, p, s.cfg.Ledger.Append)
}

// Stage is Append for an event whose seq nobody records (the request
// path's decision, rejection and completion): it returns once the event is
// durable, staged, without waiting for the integrator to sequence it
// (within audit.IntegrationBound).
//
// Errors: ErrLedgerUnavailable.
func (s *Requests) Stage(ctx context.Context, tenant cloison.TenantID, p audit.Payload) error {
	_, err := s.record(ctx, tenant, p, s.cfg.Ledger.Stage)
	return err
}

// stageReceipted is Stage for the entry that acknowledges request id: it
// returns the entry's signed receipt (Recorder.Receipt over the record the
// writer returned, so over the leaf hash of the payload actually staged).
// No receipt, no acknowledgement: a receipt that cannot be signed fails
// the request as the write would.
//
// Errors: ErrLedgerUnavailable.
func (s *Requests) stageReceipted(ctx context.Context, tenant cloison.TenantID, id cloison.RequestID, p audit.Payload) (string, error) {
	rec, err := s.record(ctx, tenant, p, s.cfg.Ledger.Stage)
	if err != nil {
		return "", err
	}
	r, err := s.cfg.Ledger.Receipt(rec, id)
	if err != nil {
		s.log.Error("ledger receipt failed", "kind", p.Kind(), "err", err)
		s.obs.OnLedgerError()
		return "", fmt.Errorf("%w: receipt: %v", ErrLedgerUnavailable, err)
	}
	return r, nil
}

func (s *Requests) record(ctx context.Context, tenant cloison.TenantID, p audit.Payload,
	write func(context.Context, audit.Event) (audit.Record, error)) (audit.Record, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LedgerTimeout)
	defer cancel()
	ctx, span := s.tracer.Start(ctx, "ledger.append", trace.WithAttributes(attrKind.String(string(p.Kind()))))
	defer span.End()
	rec, err := write(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: s.cfg.Node, Payload: p})
	if err != nil {
		tracing.Fail(span, ErrLedgerUnavailable)
		s.log.Error("ledger append failed", "kind", p.Kind(), "err", err)
		s.obs.OnLedgerError()
		return rec, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	return rec, nil
}

// Ready is the reason the node is not ready, or nil: the capacity
// attestation passed and the ledger answers within 2 s (a node that cannot
// ledger serves nothing, so it must not be sent requests).
//
// Errors: a plain error naming the reason (no code: the transports answer
// it as not ready, never to a tenant's request).
func (s *Requests) Ready(ctx context.Context) error {
	if err := s.ModelReady(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Ledger.Head(ctx); err != nil {
		return errors.New("ledger unreachable")
	}
	return nil
}

// ModelReady is the reason this model is not ready, or nil: its capacity
// attestation passed and its engine has not stopped (an engine with a
// Stopped method). The reason names no model: readiness is answered to
// anyone.
func (s *Requests) ModelReady() error {
	if !s.cfg.Engine.Attestation().OK {
		return errors.New("capacity attestation failed")
	}
	if st, ok := s.cfg.Engine.(interface{ Stopped() bool }); ok && st.Stopped() {
		return errors.New("a model's engine stopped")
	}
	return nil
}

// SanitizeName maps a reason, an address or a subject to the ledger's Name
// alphabet (anything else becomes '_', cut at audit.MaxNameLen), so that
// text from outside can never make an event unwritable.
func SanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:/@+-", c) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > audit.MaxNameLen {
		b = b[:audit.MaxNameLen]
	}
	return string(b)
}
