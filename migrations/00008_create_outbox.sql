-- +goose Up
-- Transitions not yet published to ATMOST_EVENTS. A row points at its history row; the relay
-- builds the event from it, publishes with Nats-Msg-Id = event id, then deletes the row.
-- dispatch marks a transition into pending, which also puts a work item on ATMOST_DISPATCH.
CREATE TABLE outbox (
    delivery_key BYTEA       NOT NULL,
    seq          BIGINT      NOT NULL,
    dispatch     BOOL        NOT NULL DEFAULT false,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT outbox_pkey PRIMARY KEY (delivery_key, seq),
    CONSTRAINT outbox_history_fkey FOREIGN KEY (delivery_key, seq) REFERENCES history (delivery_key, seq)
);

-- +goose Down
DROP TABLE outbox;
