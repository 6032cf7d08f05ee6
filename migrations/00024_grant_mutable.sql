-- +goose Up
GRANT SELECT, INSERT, UPDATE ON intents, source_heads, accounts, policies, switches, rate_buckets TO atmost_app;

-- +goose Down
REVOKE ALL ON intents, source_heads, accounts, policies, switches, rate_buckets FROM atmost_app;
