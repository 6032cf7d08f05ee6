-- +goose Up
-- Kill switches: scope '' is the global switch, any other scope an account id. engaged = true
-- stops every new authorization in that scope.
CREATE TABLE switches (
    scope      TEXT        NOT NULL,
    engaged    BOOL        NOT NULL,
    reason     TEXT        NOT NULL DEFAULT '',
    actor      TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT switches_pkey PRIMARY KEY (scope)
);

-- +goose Down
DROP TABLE switches;
