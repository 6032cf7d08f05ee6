-- +goose Up
-- Append-only: input ingest refused, with its reason and the raw bytes (bounded). The
-- (stream, stream_seq) key makes a redelivered bad message one row, not two.
CREATE TABLE rejects (
    reject_id     UUID        NOT NULL DEFAULT gen_random_uuid(),
    reason        TEXT        NOT NULL,
    detail        TEXT        NOT NULL DEFAULT '',
    subject       TEXT        NOT NULL DEFAULT '',
    stream        TEXT        NOT NULL DEFAULT '',
    stream_seq    BIGINT      NULL,
    headers       JSONB       NOT NULL DEFAULT '{}',
    raw           BYTEA       NOT NULL,
    raw_size      INT         NOT NULL,
    raw_truncated BOOL        NOT NULL DEFAULT false,
    received_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT rejects_pkey PRIMARY KEY (reject_id),
    CONSTRAINT rejects_stream_seq_key UNIQUE (stream, stream_seq),
    CONSTRAINT rejects_reason_check CHECK (reason <> '')
);

-- +goose Down
DROP TABLE rejects;
