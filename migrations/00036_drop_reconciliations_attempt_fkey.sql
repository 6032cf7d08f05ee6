-- +goose Up
-- After a ledger restore, `atmost restore reconcile` moves an intent that ATMOST_EVENTS shows
-- authorized after the backup point to indeterminate, naming the attempt from the stream: an
-- attempt the restored ledger never saw, so it has no attempts row. Its one reconciliation
-- lookup must still be claimable (the primary key (attempt_token, step) still allows only one),
-- so reconciliations no longer requires the attempt row, as attempt_evidence never did.
ALTER TABLE reconciliations DROP CONSTRAINT reconciliations_attempt_fkey;

-- +goose Down
ALTER TABLE reconciliations ADD CONSTRAINT reconciliations_attempt_fkey FOREIGN KEY (attempt_token) REFERENCES attempts (attempt_token);
