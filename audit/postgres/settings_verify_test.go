package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// VerifyRegister checks every register settings version against its
// register.settings_set event, not only the one in use: an older version
// edited (content and digest rewritten together) or removed behind the
// triggers is reported, though RegisterSettings, which reads the latest,
// still succeeds.
func TestVerifyRegisterChecksEverySettingsVersion(t *testing.T) {
	for _, tamper := range []struct {
		name string
		sql  string
	}{
		{"older version edited", `UPDATE register_settings SET content = convert_to(replace(convert_from(content, 'UTF8'), 'Première', 'Autre'), 'UTF8'),
			content_sha256 = sha256(convert_to(replace(convert_from(content, 'UTF8'), 'Première', 'Autre'), 'UTF8')) WHERE version = 1`},
		{"older version removed", `DELETE FROM register_settings WHERE version = 1`},
		{"older version tied to another event", `UPDATE register_settings SET ledger_seq = (SELECT ledger_seq FROM register_settings WHERE version = 2) WHERE version = 1`},
	} {
		t.Run(tamper.name, func(t *testing.T) {
			db := pgtest.New(t)
			ctx := context.Background()
			s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			contact := audit.Contact{Name: "Élise Tremblay", Title: "Responsable PRP", Email: "prp@exemple.qc.ca"}
			for _, name := range []string{"Première inc.", "Seconde inc."} {
				if _, err := s.SetRegisterSettings(ctx, "admin:elise", audit.Organization{Name: name}, contact); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.VerifyRegister(ctx); err != nil {
				t.Fatalf("untouched register: %v", err)
			}
			owner := db.AdminPool(t)
			if _, err := owner.Exec(ctx, `ALTER TABLE register_settings DISABLE TRIGGER register_settings_no_change`); err != nil {
				t.Fatal(err)
			}
			if _, err := owner.Exec(ctx, tamper.sql); err != nil {
				t.Fatal(err)
			}
			if cur, err := s.RegisterSettings(ctx); err != nil || cur.Organization.Name != "Seconde inc." {
				t.Fatalf("the version in use is untouched: got %+v, %v", cur, err)
			}
			if err := s.VerifyRegister(ctx); !errors.Is(err, audit.ErrChainBroken) {
				t.Errorf("got %v, want ErrChainBroken", err)
			}
		})
	}
}
