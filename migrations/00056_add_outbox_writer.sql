-- +goose Up
-- The transaction that wrote a row, for the hot writes (Submit, Begin, Authorize, Complete): a
-- number the writer draws for its transaction, NULL for every other writer. The read behind a
-- hot write's statement (OutboxEarlierFor) leaves out the rows its own statement wrote, whose
-- events that statement already returned, and builds events for the earlier rows only: reading
-- its own back cost a history and an intent lookup for every transition of the batch.
ALTER TABLE outbox ADD COLUMN writer BIGINT;

-- +goose Down
ALTER TABLE outbox DROP COLUMN writer;
