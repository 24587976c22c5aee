-- AdTally schema, version 12: key access only turns JIT compilation off too.
--
-- adtally_key_access_only() turns sequential scans off for the rest of a transaction (migration
-- 0005: why). PostgreSQL does that by adding a "disable cost" of 10^10 to every sequential scan it
-- still has to plan, such as the one-row reads of lifecycle_state and published_final_before and the
-- four-row read of rollup_day_phases that open every report. That cost is far above jit_above_cost
-- (100,000 by default) and the inlining and optimization thresholds (500,000), so every such
-- statement was compiled with LLVM before running: about 30 ms for the phases, 210 ms for the
-- rollup state, on a statement that takes a tenth of a millisecond. Measured on the 20-million-event
-- data of scripts/bench-reports: the single-ad report took 200-300 ms, nearly all of it JIT;
-- with JIT off in these transactions, 4 ms. Key access reads a few thousand index entries at most,
-- where JIT never pays for itself, so it is off wherever key access is on (reports, event batches,
-- the retention check that calls it).
--
-- Locks and duration: none worth saying (one function replaced). On Citus the function is
-- propagated to every node, as migration 0006's was.
CREATE OR REPLACE FUNCTION adtally_key_access_only() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
            set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true),
            set_config('citus.enable_deadlock_prevention', 'off', true);
END
$$;
