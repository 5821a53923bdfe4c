# Data classification decides how pages are isolated. Personal information
# (Loi 25) and confidential data are served only from the tenant's
# dedicated pages, zeroed before every reuse; other tenants keep the tier
# and zeroing mode of their record.
package cloison.policy

classifications := {"public", "internal", "confidential", "personal"}

sensitive_classifications := {"confidential", "personal"}

sensitive if input.tenant.classification in sensitive_classifications

known_classification if input.tenant.classification in classifications

deny contains {"code": "permission_denied", "message": "unknown data classification"} if not known_classification

tier := "dedicated" if sensitive
else := input.tenant.tier

zeroing := "always" if sensitive
else := input.tenant.zeroing
