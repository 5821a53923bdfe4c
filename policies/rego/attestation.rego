# No service while the capacity attestation fails: the pool might not hold
# what the engine advertises, and admission would have to improvise.
package cloison.policy

attested if input.attestation.ok == true

deny contains {"code": "unavailable", "message": sprintf("capacity attestation failed: %s", [attestation_reason])} if not attested

attestation_reason := input.attestation.reason if is_string(input.attestation.reason)
else := "no attestation"
