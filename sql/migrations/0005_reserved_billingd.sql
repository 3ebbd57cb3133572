-- 0005_reserved_billingd.sql - PLACEHOLDER so that 0006_close.sql builds on the close
-- branch (migrations are numbered without gaps). Version 5 belongs to
-- the billingd helper (branch billingd); when merging, DROP this file and keep theirs.
SELECT 1;
