-- 0005_reserved: a placeholder. Version 5 is taken by a migration of
-- another branch that is merged separately; the migrations must run
-- 1..n without a gap, so this branch holds the number with a no-op
-- until that migration replaces this file.
SELECT 1;
