-- Vendor credit: what the operator granted a vendor to hand out as key quota, and what its keys drew.
ALTER TABLE vendors ADD COLUMN credit_nanos bigint NOT NULL DEFAULT 0;
ALTER TABLE vendors ADD COLUMN credit_used_nanos bigint NOT NULL DEFAULT 0;
