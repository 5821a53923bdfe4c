package postgres

import (
	"crypto/ed25519"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

// The domain types below live in package audit (ExportOptions in
// audit/export); these names keep callers that still spell them
// postgres.X compiling until they name the audit types themselves.
type (
	TenantLogEntry = audit.TenantLogEntry
	TenantEntry    = audit.TenantEntry
	Report         = audit.Report
	NewReport      = audit.NewReport
	ReportLimit    = audit.ReportLimit
	StoredResponse = audit.StoredResponse
	VerifyOptions  = audit.VerifyOptions
	ExportOptions  = export.Options
	DeploymentKey  = audit.DeploymentKey
	KeyPolicy      = audit.KeyPolicy
)

// Deployment key purposes: audit's.
const (
	PurposeCheckpoint = audit.PurposeCheckpoint
	PurposeKEK        = audit.PurposeKEK
	PurposeCluster    = audit.PurposeCluster
)

// Sentinels that moved to audit: the same values, so errors.Is matches
// either name.
var (
	ErrNotFound    = audit.ErrNotFound
	ErrOutOfRange  = audit.ErrOutOfRange
	ErrReportRate  = audit.ErrReportRate
	ErrKeyMismatch = audit.ErrKeyMismatch
	ErrKeyRetired  = audit.ErrKeyRetired
)

// CheckpointKey is audit.CheckpointKey.
func CheckpointKey(pub ed25519.PublicKey) DeploymentKey { return audit.CheckpointKey(pub) }
