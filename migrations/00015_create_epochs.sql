-- +goose Up
-- The restore epoch: the current epoch is the highest row. atmost epoch bump inserts the next
-- one after a restore; every attempt and completion is fenced on (epoch, generation).
CREATE TABLE epochs (
    epoch      BIGINT      NOT NULL,
    reason     TEXT        NOT NULL DEFAULT '',
    actor      TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT epochs_pkey PRIMARY KEY (epoch),
    CONSTRAINT epochs_epoch_check CHECK (epoch >= 1)
);

-- +goose Down
DROP TABLE epochs;
