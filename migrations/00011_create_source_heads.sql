-- +goose Up
-- The stored head version of every source an intent rests on. A new version supersedes
-- whatever is stored here (resolve to the stored head, never reject because a head exists).
CREATE TABLE source_heads (
    source_id        TEXT        NOT NULL,
    head_version     BYTEA       NOT NULL,
    raw_hash         BYTEA       NULL,
    previous_version BYTEA       NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT source_heads_pkey PRIMARY KEY (source_id),
    CONSTRAINT source_heads_head_version_check CHECK (octet_length(head_version) = 32)
);

-- +goose Down
DROP TABLE source_heads;
