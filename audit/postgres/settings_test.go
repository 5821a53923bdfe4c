package postgres

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// The organisation and privacy officer set through SetRegisterSettings are
// stored with a ledger event naming only their version and digest, and new
// entries name them; before any is set, Config's (the flags') are used.
func TestRegisterSettings(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir(),
		Organization: audit.Organization{Name: "Flag Org"}, Contact: audit.Contact{Name: "Flag Officer"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	detect := func(check audit.Name) audit.IncidentVersion {
		t.Helper()
		id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceTransferFailure, Invariant: check, DetectedAt: time.Now(), AffectedResponses: 1})
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Incident(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return f.Latest().IncidentVersion
	}
	if v := detect("a"); v.Organization.Name != "Flag Org" || v.Contact.Name != "Flag Officer" {
		t.Fatalf("before any setting: %+v %+v", v.Organization, v.Contact)
	}
	org := audit.Organization{Name: "Exemple inc.", NEQ: "1234567890"}
	contact := audit.Contact{Name: "Élise Tremblay", Title: "Responsable PRP", Phone: "+1 514 555 0100", Email: "prp@exemple.qc.ca"}
	got, err := s.SetRegisterSettings(ctx, "admin:elise", org, contact)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 {
		t.Errorf("version %d, want 1", got.Version)
	}
	if cur, err := s.RegisterSettings(ctx); err != nil || cur != got {
		t.Errorf("RegisterSettings: %+v %v, want %+v", cur, err, got)
	}
	if v := detect("b"); v.Organization != org || v.Contact != contact {
		t.Errorf("after setting: %+v %+v", v.Organization, v.Contact)
	}
	// The ledger event holds the digest of the stored row, no names.
	var found bool
	if err := s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindRegisterSettings {
			found = true
			for _, text := range []string{"Tremblay", "514 555", "Exemple", "prp@"} {
				if bytes.Contains(r.Payload, []byte(text)) {
					t.Errorf("ledger event holds %q: %s", text, r.Payload)
				}
			}
			if r.Actor != "admin:elise" {
				t.Errorf("actor %s", r.Actor)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no register.settings_set event")
	}
	for _, bad := range []struct {
		org     audit.Organization
		contact audit.Contact
	}{
		{audit.Organization{}, contact},
		{org, audit.Contact{}},
		{audit.Organization{Name: "X", NEQ: "12ab"}, contact},
		{org, audit.Contact{Name: "X", Email: "not-an-address"}},
		{org, audit.Contact{Name: "X\n"}},
	} {
		if _, err := s.SetRegisterSettings(ctx, "admin:elise", bad.org, bad.contact); !errors.Is(err, audit.ErrInvalidIncident) {
			t.Errorf("%+v %+v: got %v, want ErrInvalidIncident", bad.org, bad.contact, err)
		}
	}
	// A row edited behind the ledger's back is refused, not used.
	owner := db.AdminPool(t)
	if _, err := owner.Exec(ctx, `ALTER TABLE register_settings DISABLE TRIGGER register_settings_no_change`); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `UPDATE register_settings SET content = convert_to(replace(convert_from(content, 'UTF8'), 'Exemple', 'Autre'), 'UTF8'),
		content_sha256 = sha256(convert_to(replace(convert_from(content, 'UTF8'), 'Exemple', 'Autre'), 'UTF8'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterSettings(ctx); !errors.Is(err, audit.ErrChainBroken) {
		t.Errorf("edited settings: got %v, want ErrChainBroken", err)
	}
}
