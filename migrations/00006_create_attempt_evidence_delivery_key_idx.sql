-- +goose Up
CREATE INDEX attempt_evidence_delivery_key_idx ON attempt_evidence (delivery_key, recorded_at);

-- +goose Down
DROP INDEX attempt_evidence_delivery_key_idx;
