-- +goose Up
-- One row per account the operator configured. The credential itself lives elsewhere
-- (credential_ref names where); credential_version changes on rotate and revoke.
CREATE TABLE accounts (
    account_id         TEXT        NOT NULL,
    platform           TEXT        NOT NULL,
    settings           JSONB       NOT NULL DEFAULT '{}',
    credential_ref     TEXT        NOT NULL DEFAULT '',
    credential_version BIGINT      NOT NULL DEFAULT 1,
    revoked            BOOL        NOT NULL DEFAULT false,
    contract_version   TEXT        NOT NULL DEFAULT '',
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT accounts_pkey PRIMARY KEY (account_id),
    CONSTRAINT accounts_account_id_check CHECK (octet_length(account_id) BETWEEN 1 AND 128),
    CONSTRAINT accounts_platform_check CHECK (platform <> ''),
    CONSTRAINT accounts_credential_version_check CHECK (credential_version >= 1)
);

-- +goose Down
DROP TABLE accounts;
