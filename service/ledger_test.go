package service_test

import (
	"github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/service"
)

// The store the assembly hands the service is its whole ledger; checked
// here because the service itself names no storage package.
var (
	_ service.Ledger          = (*postgres.Store)(nil)
	_ service.Recorder        = (*postgres.Store)(nil)
	_ service.RegisterStore   = (*postgres.Store)(nil)
	_ service.LedgerReader    = (*postgres.Store)(nil)
	_ service.TransparencyLog = (*postgres.Store)(nil)
	_ service.Served          = (*postgres.Store)(nil)
)
