-- +goose Up
-- One token bucket per account for the rate limit checked at authorization. A single
-- INSERT ... ON CONFLICT DO UPDATE ... WHERE refills and takes a token atomically, at any
-- isolation level; no row back means rate limited. The rate and burst last used are kept with
-- the bucket so the refill can read them from the conflicting row.
CREATE TABLE rate_buckets (
    account_id      TEXT             NOT NULL,
    tokens          DOUBLE PRECISION NOT NULL,
    rate_per_minute INT              NOT NULL,
    rate_burst      INT              NOT NULL,
    refilled_at     TIMESTAMPTZ      NOT NULL DEFAULT now(),
    CONSTRAINT rate_buckets_pkey PRIMARY KEY (account_id)
);

-- +goose Down
DROP TABLE rate_buckets;
