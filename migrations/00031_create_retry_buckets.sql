-- +goose Up
-- One token bucket per account for the sweeper's automatic retries: a pass reopens at most as
-- many failed intents as the bucket holds, refilled at the account's policy rate, so raising a
-- cap or a rate releases a backlog at that rate and never all at once. The row is locked by
-- the pass that takes from it, so sweepers running at once share one budget.
CREATE TABLE retry_buckets (
    account_id  TEXT             NOT NULL,
    tokens      DOUBLE PRECISION NOT NULL,
    refilled_at TIMESTAMPTZ      NOT NULL DEFAULT now(),
    CONSTRAINT retry_buckets_pkey PRIMARY KEY (account_id),
    CONSTRAINT retry_buckets_tokens_check CHECK (tokens >= 0)
);

-- +goose Down
DROP TABLE retry_buckets;
