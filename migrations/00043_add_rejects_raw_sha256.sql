-- +goose Up
-- The SHA-256 of a refused message's whole body, also when only its first bytes are kept (or,
-- for a message recorded as unstorable, none): it names the exact message a producer sent.
-- Rows written before this column have NULL.
ALTER TABLE rejects ADD COLUMN raw_sha256 BYTEA NULL;

-- +goose Down
ALTER TABLE rejects DROP COLUMN raw_sha256;
