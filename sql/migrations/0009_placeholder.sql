-- 0009_placeholder.sql - NOT FOR MERGE: stands in for the 0009 of another branch
-- (issue 23) so that this branch, whose migration is 0012, builds alone.

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;
