-- +goose Up
-- atmost controls log reads the newest changes first, of every kind or of one.
CREATE INDEX control_history_at_idx ON control_history (at);

-- +goose Down
DROP INDEX control_history_at_idx;
