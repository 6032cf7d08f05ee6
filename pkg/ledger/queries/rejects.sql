-- name: RejectsInsert :execrows
-- Stores refused input with its reason and raw bytes (bounded by the caller). A message that is
-- redelivered is stored once: (stream, stream_seq) is unique.
INSERT INTO rejects (reason, detail, subject, stream, stream_seq, headers, raw, raw_size, raw_truncated, raw_sha256)
SELECT r.reason, r.detail, r.subject, r.stream, r.stream_seq, r.headers::JSONB, r.raw, r.raw_size, r.raw_truncated, r.raw_sha256
FROM (
    SELECT unnest(@reasons::TEXT[]) AS reason,
           unnest(@details::TEXT[]) AS detail,
           unnest(@subjects::TEXT[]) AS subject,
           unnest(@streams::TEXT[]) AS stream,
           unnest(@stream_seqs::BIGINT[]) AS stream_seq,
           unnest(@headers::TEXT[]) AS headers,
           unnest(@raws::BYTEA[]) AS raw,
           unnest(@raw_sizes::INT[]) AS raw_size,
           unnest(@raw_truncateds::BOOL[]) AS raw_truncated,
           unnest(@raw_sha256s::BYTEA[]) AS raw_sha256
) r
ON CONFLICT (stream, stream_seq) DO NOTHING;
