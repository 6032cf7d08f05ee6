-- +goose Up
-- An operator's stop of one account (atmost accounts disable): its intents wait, visibly, and
-- Authorize refuses every attempt of it (account_disabled) until it is enabled again. Unlike
-- revoked it says nothing about the credential, and enabling changes no credential version.
ALTER TABLE accounts ADD COLUMN disabled BOOL NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE accounts DROP COLUMN disabled;
