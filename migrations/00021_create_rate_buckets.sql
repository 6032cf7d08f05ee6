-- +goose Up
-- One token bucket per account for the rate limit checked at authorization. A single
-- INSERT ... ON CONFLICT DO UPDATE ... WHERE refills and takes a token atomically, at any
-- isolation level; no row back means rate limited. The rate and burst last used are kept with
-- the bucket so the refill can read them from the conflicting row; granted is how many tokens
-- the last take handed out (a batch of authorizations takes several at once).
CREATE TABLE rate_buckets (
    account_id      TEXT             NOT NULL,
    tokens          DOUBLE PRECISION NOT NULL,
    rate_per_minute INT              NOT NULL,
    rate_burst      INT              NOT NULL,
    granted         INT              NOT NULL DEFAULT 0,
    refilled_at     TIMESTAMPTZ      NOT NULL DEFAULT now(),
    CONSTRAINT rate_buckets_pkey PRIMARY KEY (account_id)
);

-- +goose Down
DROP TABLE rate_buckets;
