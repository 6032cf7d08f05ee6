-- +goose Up
-- The slot (probe_token with probe_until, both or neither): a probing account always holds it
-- (its probe), a holding one never does, and a serving one only while it is suspect (failures
-- counted since its last success: one attempt in flight at a time, docs/design.md#the-bound-on-sends-to-a-platform-that-is-down).
ALTER TABLE account_health ADD CONSTRAINT account_health_probe_check CHECK ((probe_token IS NULL) = (probe_until IS NULL)
    AND (state <> 'probing' OR probe_token IS NOT NULL) AND (state <> 'holding' OR probe_token IS NULL)
    AND (state <> 'serving' OR probe_token IS NULL OR failures > 0));

-- +goose Down
ALTER TABLE account_health DROP CONSTRAINT account_health_probe_check;
