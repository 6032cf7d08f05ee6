-- +goose Up
GRANT SELECT, INSERT, UPDATE ON intents, text_claims, source_heads, accounts, policies, switches TO atmost_app;

-- +goose Down
REVOKE ALL ON intents, text_claims, source_heads, accounts, policies, switches FROM atmost_app;
