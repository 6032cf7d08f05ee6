-- name: LedgerOrphans :one
-- Rows whose intent (or, for the outbox, whose history row) does not exist: what the foreign
-- keys dropped in migrations 39 to 41 used to refuse, and the reconciliation and evidence rows that
-- never had one. One statement, so one snapshot: a row and its intent written together are
-- seen together. Every count is zero in a sound ledger.
SELECT
    (SELECT count(*) FROM history h
     WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.delivery_key = h.delivery_key))::BIGINT AS history,
    (SELECT count(*) FROM attempts a
     WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.delivery_key = a.delivery_key))::BIGINT AS attempts,
    (SELECT count(*) FROM attempt_evidence e
     WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.delivery_key = e.delivery_key))::BIGINT AS evidence,
    (SELECT count(*) FROM reconciliations r
     WHERE NOT EXISTS (SELECT 1 FROM intents i WHERE i.delivery_key = r.delivery_key))::BIGINT AS reconciliations,
    (SELECT count(*) FROM outbox o
     WHERE NOT EXISTS (SELECT 1 FROM history h WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq))::BIGINT AS outbox;
