package ledger_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// floorSteps are the rows atmost keeps for an intent that is published at its first attempt,
// written as plainly as PostgreSQL allows: by key, in the four transactions the pipeline
// commits (Complete follows the send; Begin stays apart from Authorize so that an unavailable
// JetStream spends no attempt), with no guard, no outbox row and no read. What
// BenchmarkPipelineCost measures above this is the price of the guards, the outbox, Get and
// Gates, and the reads behind the writes.
var floorSteps = []struct{ name, sql string }{
	{"submit", `WITH i AS (
		INSERT INTO intents (delivery_key, account_id, action, target, request, text_hash, batch_ord)
		SELECT k, $2, 'post', '', '{"text":"floor"}', sha256(k), o::INT
		FROM unnest($1::BYTEA[]) WITH ORDINALITY AS u(k, o)
		RETURNING delivery_key)
	INSERT INTO history (delivery_key, seq, from_state, to_state, actor)
	SELECT delivery_key, 1, NULL, 'pending', 'floor' FROM i`},
	{"begin", `WITH u AS (
		UPDATE intents SET attempt_token = substring(sha256(delivery_key || '\x61'::BYTEA) FOR 16), epoch = 1,
			generation = nextval('attempt_generation'), lease_expires_at = now() + INTERVAL '30 seconds',
			transition_seq = 2, updated_at = now()
		WHERE delivery_key = ANY($1::BYTEA[])
		RETURNING delivery_key, attempt_token, generation),
	a AS (
		INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
		SELECT attempt_token, delivery_key, $2, 'post', sha256(delivery_key), 1, 1, generation FROM u)
	INSERT INTO history (delivery_key, seq, from_state, to_state, actor, attempt_token, epoch, generation)
	SELECT delivery_key, 2, 'pending', 'pending', 'floor', attempt_token, 1, generation FROM u`},
	{"authorize", `WITH u AS (
		UPDATE intents SET state = 'authorized', attempts_authorized = 1, transition_seq = 3, updated_at = now()
		WHERE delivery_key = ANY($1::BYTEA[])
		RETURNING delivery_key, attempt_token, generation, text_hash),
	t AS (
		INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at)
		SELECT $2, text_hash, delivery_key, now() FROM u
		ON CONFLICT (account_id, text_hash) DO UPDATE SET delivery_key = excluded.delivery_key, last_at = excluded.last_at)
	INSERT INTO history (delivery_key, seq, from_state, to_state, actor, attempt_token, epoch, generation)
	SELECT delivery_key, 3, 'pending', 'authorized', 'floor', attempt_token, 1, generation FROM u`},
	{"complete", `WITH u AS (
		UPDATE intents SET state = 'published', lease_expires_at = NULL, object_id = encode(substring(delivery_key FOR 8), 'hex'),
			transition_seq = 4, updated_at = now()
		WHERE delivery_key = ANY($1::BYTEA[]) AND account_id = $2
		RETURNING delivery_key, attempt_token, generation, object_id),
	e AS (
		INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, object_id, fenced, witness_seq)
		SELECT attempt_token, delivery_key, 1, generation, 'success', object_id, false, 1 FROM u)
	INSERT INTO history (delivery_key, seq, from_state, to_state, actor, attempt_token, epoch, generation)
	SELECT delivery_key, 4, 'authorized', 'published', 'floor', attempt_token, 1, generation FROM u`},
}

// BenchmarkRecordsFloor is the PostgreSQL CPU that the records alone cost an intent on this
// server, the yardstick for BenchmarkPipelineCost at the same -batch: the intent, its three
// updates, its four history rows, the attempt, its evidence and the text claim, on atmost's
// schema (its indexes and constraints), in batches of -batch keys, each of the four
// transactions one round trip (BEGIN, the statement, COMMIT) on one connection as the
// application role. It reports the backend's CPU per intent, by step and in all
// (pg-us/intent), from /proc/PID/schedstat, after the same warm-up and ANALYZE as
// BenchmarkPipelineCost (-args -cost-analyze=false: none). Needs a local PostgreSQL.
func BenchmarkRecordsFloor(b *testing.B) {
	e, _ := benchEnv(b, 1)
	pool, pid := oneBackend(b, e, nil)
	begin := "BEGIN ISOLATION LEVEL SERIALIZABLE"
	if benchIsolation == "read-committed" {
		begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
	}

	size := benchBatch
	cpu := make([]time.Duration, len(floorSteps))
	var seq int
	lifecycle := func(measure bool) {
		keys := make([][]byte, size)
		for i := range keys {
			seq++
			k := sha256.Sum256(fmt.Appendf(nil, "floor %d %d", time.Now().UnixNano(), seq))
			keys[i] = k[:]
		}
		for i, s := range floorSteps {
			c0 := backendCPU(pid)
			batch := &pgx.Batch{}
			batch.Queue(begin)
			batch.Queue(s.sql, keys, account)
			batch.Queue("COMMIT")
			require.NoError(b, pool.SendBatch(e.ctx, batch).Close(), s.name)
			if measure {
				cpu[i] += backendCPU(pid) - c0
			}
		}
	}
	for range 2000 / size {
		lifecycle(false)
	}
	if costAnalyze {
		e.exec(`ANALYZE`)
	}
	batches := (b.N + size - 1) / size
	b.ResetTimer()
	for range batches {
		lifecycle(true)
	}
	b.StopTimer()
	intents := float64(batches * size)
	var all time.Duration
	for i, s := range floorSteps {
		all += cpu[i]
		b.ReportMetric(float64(cpu[i].Microseconds())/intents, s.name+"-pg-us/intent")
	}
	b.ReportMetric(float64(all.Microseconds())/intents, "pg-us/intent")
}
