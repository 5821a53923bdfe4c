package cloison

import "regexp"

var labelValue = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidLabel reports whether v may be a residency label value (a node's
// region or tier, or one a tenant's residency names): 1–63 of a–z, 0–9 and
// '-', starting and ending with a letter or digit (a DNS label, as a
// Kubernetes topology label value usually is). It is here, in the shared
// vocabulary, because the tenant store checks a tenant's residency with the
// grammar the attestation checks nodes with, without depending on the KV
// pool that attestation measures.
func ValidLabel(v string) bool { return labelValue.MatchString(v) }
