-- 0004_reserved_guards.sql - PLACEHOLDER so that 0006_close.sql builds on the close
-- branch (migrations are numbered without gaps). Version 4 belongs to
-- database guards (branch dbguards, 0004_guards.sql); when merging, DROP this file and keep theirs.
SELECT 1;
