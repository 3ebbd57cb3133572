-- 0025_reserved.sql - a number kept for another branch of the same day
-- (h34's, issue 28): it changes nothing, so that the versions stay 1, 2,
-- 3... without a gap (store/gen-migrations.sh). When that branch brings
-- its own 0025, this file is the one to leave out of the merge.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
