-- +goose Up
-- The token the claiming reconciler minted for its claim of the one lookup, kept on the claimed
-- and the resolved rows. A reconciler whose claim committed but whose answer was lost (a cut
-- connection, a reset during COMMIT) asks again with the same token and learns that the claim is
-- its own: the lookup is still made at most once, by the one who holds the claim, instead of
-- never. NULL on the rows written before it.
ALTER TABLE reconciliations ADD COLUMN claim_token BYTEA NULL CONSTRAINT reconciliations_claim_token_check CHECK (claim_token IS NULL OR octet_length(claim_token) = 16);

-- +goose Down
ALTER TABLE reconciliations DROP COLUMN claim_token;
