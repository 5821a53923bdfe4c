package api_test

import (
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit/postgres"
)

// The store the assembly passes as Config.Ledger; checked here because api
// itself names no storage package.
var _ api.Ledger = (*postgres.Store)(nil)
