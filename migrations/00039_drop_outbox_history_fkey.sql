-- +goose Up
-- attempts, history and outbox rows are only ever written by the ledger's own statements: in
-- the same statement as the intent change they record, from the rows that change returned, or
-- (restore reconcile) in the same transaction, right after the statement that changed the
-- intent returned it. The row they point at exists by construction, and the application role
-- may delete neither intents, attempts nor history. Each of these foreign keys cost one query
-- per inserted row inside PostgreSQL (an SPI lookup taking a key-share lock; 9 per intent on
-- the way to published, about a quarter of the database's CPU under load), for a promise no
-- statement can break. What they promised is checked instead by Ledger.Orphans: the chaos
-- suite, the randomized ledger test and the restore test require zero orphans. Migrations 40
-- and 41 drop the other two.
ALTER TABLE outbox DROP CONSTRAINT outbox_history_fkey;

-- +goose Down
ALTER TABLE outbox ADD CONSTRAINT outbox_history_fkey FOREIGN KEY (delivery_key, seq) REFERENCES history (delivery_key, seq);
