-- +goose Up
-- Append-only: one row per operator change to a control (a kill switch, a policy row, the
-- restore epoch), written in the same statement as the change. scope is the account id, or ''
-- for the global switch and the default policy (account ids are 1-128 bytes, so '' never names
-- one). before is NULL when the change created the control; before and after hold the
-- control's settable columns, so the row alone says what the operator changed.
CREATE TABLE control_history (
    control_id UUID        NOT NULL DEFAULT gen_random_uuid(),
    kind       TEXT        NOT NULL,
    scope      TEXT        NOT NULL,
    actor      TEXT        NOT NULL,
    reason     TEXT        NOT NULL DEFAULT '',
    before     JSONB       NULL,
    after      JSONB       NOT NULL,
    at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT control_history_pkey PRIMARY KEY (control_id),
    CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch')),
    CONSTRAINT control_history_actor_check CHECK (actor <> '')
);

-- +goose Down
DROP TABLE control_history;
