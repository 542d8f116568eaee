"""Publication: the DPO's release gate (declared as data) and the publication ledger."""
