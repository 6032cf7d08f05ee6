-- +goose Up
-- One token bucket per account for the rate limit checked at authorization. A single
-- INSERT ... ON CONFLICT DO UPDATE ... WHERE refills and takes a token atomically, at any
-- isolation level; no row back means rate limited.
CREATE TABLE rate_buckets (
    account_id  TEXT             NOT NULL,
    tokens      DOUBLE PRECISION NOT NULL,
    refilled_at TIMESTAMPTZ      NOT NULL DEFAULT now(),
    CONSTRAINT rate_buckets_pkey PRIMARY KEY (account_id)
);

-- +goose Down
DROP TABLE rate_buckets;
