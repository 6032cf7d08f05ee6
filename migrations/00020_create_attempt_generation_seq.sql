-- +goose Up
-- The fencing generation: a standalone sequence owned by no table, so a TRUNCATE or a
-- rebuilt table never resets it. CACHE 1 keeps it strictly increasing across sessions.
-- A restore resets it too, which is why fencing pairs it with the epoch.
CREATE SEQUENCE attempt_generation AS BIGINT INCREMENT BY 1 MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE;

-- +goose Down
DROP SEQUENCE attempt_generation;
