package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// explainer stands in for the database under the generated queries: instead of running a
// statement it asks PostgreSQL for its plan, with the same arguments.
type explainer struct {
	t    *testing.T
	conn *pgxpool.Conn
	plan string
}

var errExplained = errors.New("explained, not run")

func (x *explainer) explain(ctx context.Context, sql string, args ...any) {
	rows, err := x.conn.Query(ctx, "EXPLAIN "+sql, args...)
	require.NoError(x.t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(x.t, err)
	x.plan = strings.Join(lines, "\n")
}

func (x *explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	x.explain(ctx, sql, args...)
	return pgconn.CommandTag{}, errExplained
}

func (x *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	x.explain(ctx, sql, args...)
	return nil, errExplained
}

func (x *explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	x.explain(ctx, sql, args...)
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errExplained }

// TestHotStatementsReachRowsByPrimaryKey asks PostgreSQL for the plan of every statement on the
// hot path, with sequential scans disabled: a plan that still scans a table sequentially has
// no index path at all, and every transition must reach its intent by primary key, never
// through a scan of a shared index (docs/design.md#the-sql-dialect: under SERIALIZABLE such
// scans take predicate locks that make concurrent transitions abort each other).
func TestHotStatementsReachRowsByPrimaryKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Plans are chosen from statistics: on an empty table every plan looks alike. 20,000
	// intents, a tenth of them authorized with leases (some expired), as a running ledger
	// holds, so that a plan through a small partial index (the leases) would be preferred if
	// a statement allowed it.
	e.exec(`INSERT INTO intents (delivery_key, account_id, action, request, state, reason, lease_expires_at, attempt_token, epoch, generation)
		SELECT decode(md5(g::TEXT) || md5('k' || g::TEXT), 'hex'), $1, 'post', '{}',
		       (CASE WHEN g % 10 = 0 THEN 'authorized' ELSE 'published' END),
		       (CASE WHEN g % 10 = 0 THEN 'authorized' ELSE 'published' END),
		       (CASE WHEN g % 10 = 0 THEN now() + (g % 3 - 1) * INTERVAL '1 minute' END),
		       (CASE WHEN g % 10 = 0 THEN decode(md5('t' || g::TEXT), 'hex') END),
		       (CASE WHEN g % 10 = 0 THEN 1 END), (CASE WHEN g % 10 = 0 THEN g END)
		FROM generate_series(1, 20000) g`, account)
	e.exec(`ANALYZE intents`)
	conn, err := e.pool.Acquire(e.ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(e.ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	x := &explainer{t: t, conn: conn}
	q := dbsqlc.New(x)
	key, token, hash := make([]byte, 32), make([]byte, 16), make([]byte, 32)
	// A dispatcher's batch: 128 keys. With so many, probing the primary key 128 times costs
	// the planner more than one scan of a partial index the statistics call nearly empty (no
	// intent was pending when the table was analyzed; a burst makes thousands pending), and
	// only the way a statement is written keeps it on the primary key.
	keys := make([][]byte, 128)
	tokens, hashes, epochs, generations := make([][]byte, 128), make([][]byte, 128), make([]int64, 128), make([]int64, 128)
	toStates, reasons, objectIDs, outcomes, details := make([]string, 128), make([]string, 128), make([]string, 128), make([]string, 128), make([]string, 128)
	for i := range keys {
		keys[i] = make([]byte, 32)
		keys[i][0], keys[i][1] = 0xee, byte(i)
		tokens[i], hashes[i], epochs[i], generations[i] = token, hash, 1, int64(i+1)
		toStates[i], reasons[i], objectIDs[i], outcomes[i], details[i] = "published", "published", "o", "success", "{}"
	}
	now := time.Now()
	// A sweeper's batch of candidates: 1,000 keys.
	sweepBatch, sweepSeqs := make([][]byte, 1000), make([]int64, 1000)
	for i := range sweepBatch {
		sweepBatch[i] = make([]byte, 32)
		sweepBatch[i][0], sweepBatch[i][1], sweepSeqs[i] = 0xdd, byte(i), 3
		sweepBatch[i][2] = byte(i >> 8)
	}

	for name, run := range map[string]func() error{
		"IntentSubmit": func() error {
			_, err := q.IntentSubmit(e.ctx, dbsqlc.IntentSubmitParams{DeliveryKeys: [][]byte{key}, AccountIds: []string{account},
				Actions: []string{"post"}, Targets: []string{""}, Requests: []string{"{}"}, Occurrences: []string{""},
				TextHashes: [][]byte{hash}, SourceIds: []string{""}, SourceVersions: [][]byte{{}}, Actor: "a"})
			return err
		},
		"IntentsBegin": func() error {
			_, err := q.IntentsBegin(e.ctx, dbsqlc.IntentsBeginParams{DeliveryKeys: keys, AttemptTokens: tokens,
				RequestHashes: hashes, LeaseMs: 1, Actor: "a"})
			return err
		},
		"IntentsAuthorize": func() error {
			_, err := q.IntentsAuthorize(e.ctx, dbsqlc.IntentsAuthorizeParams{DeliveryKeys: keys, AttemptTokens: tokens,
				Epochs: epochs, Generations: generations, RequestHashes: hashes, ContractVersion: "c",
				FailedReasons: []string{"kill_switch"}, InFlightMs: 1, Now: &now, Actor: "a"})
			return err
		},
		"IntentsComplete": func() error {
			_, err := q.IntentsComplete(e.ctx, dbsqlc.IntentsCompleteParams{DeliveryKeys: keys, AttemptTokens: tokens,
				Epochs: epochs, Generations: generations, ToStates: toStates, Reasons: reasons, ObjectIds: objectIDs,
				Outcomes: outcomes, Details: details, Actor: "a"})
			return err
		},
		"IntentRetry": func() error {
			_, err := q.IntentRetry(e.ctx, dbsqlc.IntentRetryParams{DeliveryKey: key, Actor: "a"})
			return err
		},
		"IntentsExpireLeases": func() error {
			// A sweeper's batch of candidates: 1,000 keys.
			batch := make([][]byte, 1000)
			for i := range batch {
				batch[i] = make([]byte, 32)
				batch[i][0], batch[i][1] = byte(i>>8), byte(i)
			}
			_, err := q.IntentsExpireLeases(e.ctx, dbsqlc.IntentsExpireLeasesParams{DeliveryKeys: batch, Actor: "a"})
			return err
		},
		"IntentParkUnsendable": func() error {
			_, err := q.IntentParkUnsendable(e.ctx, dbsqlc.IntentParkUnsendableParams{DeliveryKey: key, Actor: "a", Detail: []byte("{}")})
			return err
		},
		"IntentsRetryMany": func() error {
			_, err := q.IntentsRetryMany(e.ctx, dbsqlc.IntentsRetryManyParams{DeliveryKeys: sweepBatch, Seqs: sweepSeqs, Actor: "a"})
			return err
		},
		"IntentsParkUnreconciled": func() error {
			_, err := q.IntentsParkUnreconciled(e.ctx, dbsqlc.IntentsParkUnreconciledParams{DeliveryKeys: sweepBatch, StaleMs: 1, UnclaimedMs: 1, Actor: "a"})
			return err
		},
		"IntentResolveFromEvidence": func() error {
			_, err := q.IntentResolveFromEvidence(e.ctx, dbsqlc.IntentResolveFromEvidenceParams{DeliveryKey: key, ObjectID: "o", Actor: "a"})
			return err
		},
		"ReconciliationResolve": func() error {
			_, err := q.ReconciliationResolve(e.ctx, dbsqlc.ReconciliationResolveParams{DeliveryKey: key, Result: "found", Actor: "a",
				Detail: []byte("{}"), AttemptToken: token, ToState: "published", Reason: "reconciled_found"})
			return err
		},
		"IntentsSuperseded": func() error {
			_, err := q.IntentsSuperseded(e.ctx, keys)
			return err
		},
		"IntentsParkSuperseded": func() error {
			_, err := q.IntentsParkSuperseded(e.ctx, dbsqlc.IntentsParkSupersededParams{DeliveryKeys: keys, Actor: "a"})
			return err
		},
		"ReconciliationClaim": func() error {
			_, err := q.ReconciliationClaim(e.ctx, dbsqlc.ReconciliationClaimParams{DeliveryKey: key, Actor: "a"})
			return err
		},
	} {
		require.ErrorIs(t, run(), errExplained, name)
		require.NotContains(t, x.plan, "Seq Scan", "%s scans a table:\n%s", name, scans(x.plan))
		require.Contains(t, x.plan, "intents_pkey", "%s must reach intents by primary key:\n%s", name, scans(x.plan))
		shared := []string{"intents_sweep_idx", "intents_lease_expires_idx", "intents_parked_idx", "intents_parked_at_idx", "intents_published_at_idx",
			"intents_pending_account_idx"}
		if strings.Contains(name, "Superseded") {
			// Submit asks intents_source_idx whether a version was seen; the fence must not
			// scan it for a batch of keys.
			shared = append(shared, "intents_source_idx")
		}
		for _, shared := range shared {
			require.NotContains(t, x.plan, shared, "%s must reach intents by primary key, not through %s:\n%s", name, shared, scans(x.plan))
		}
		if name == "IntentsAuthorize" {
			// Whether an earlier intent waits for the text is asked of the few intents with
			// that text that may still move, never of every pending intent.
			require.Contains(t, x.plan, "intents_text_idx", "%s must ask for earlier intents through intents_text_idx:\n%s", name, scans(x.plan))
		}
	}
}

// TestThePeoplesQueueIsReadThroughItsIndex plans the reads of parked intents (an operator's
// page, the gauge's count) on a ledger of 20,000 published intents and a few parked: each must
// go through an index of the parked (intents_parked_idx, or intents_parked_at_idx, which holds
// the same intents in time order), never through every intent.
func TestThePeoplesQueueIsReadThroughItsIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO intents (delivery_key, account_id, action, request, state, reason)
		SELECT decode(md5(g::TEXT) || md5('k' || g::TEXT), 'hex'), $1, 'post', '{}',
		       (CASE WHEN g % 2000 = 0 THEN 'parked' ELSE 'published' END),
		       (CASE WHEN g % 2000 = 0 THEN 'operator_parked' ELSE 'published' END)
		FROM generate_series(1, 20000) g`, account)
	e.exec(`ANALYZE intents`)
	conn, err := e.pool.Acquire(e.ctx)
	require.NoError(t, err)
	defer conn.Release()
	x := &explainer{t: t, conn: conn}
	q := dbsqlc.New(x)
	for name, run := range map[string]func() error{
		"ParkedPage": func() error {
			_, err := q.ParkedPage(e.ctx, dbsqlc.ParkedPageParams{AfterKey: []byte{}, AccountID: "", MaxRows: 50})
			return err
		},
		"ParkedPage of an account": func() error {
			_, err := q.ParkedPage(e.ctx, dbsqlc.ParkedPageParams{AfterKey: []byte{0x80}, AccountID: account, MaxRows: 50})
			return err
		},
		"ParkedByTimePage, newest change first": func() error {
			_, err := q.ParkedByTimePage(e.ctx, dbsqlc.ParkedByTimePageParams{AfterKey: []byte{}, Descending: true, MaxRows: 50})
			return err
		},
		"IntentsOutstanding": func() error {
			_, err := q.IntentsOutstanding(e.ctx)
			return err
		},
	} {
		require.ErrorIs(t, run(), errExplained, name)
		require.Regexp(t, `intents_parked(_at)?_idx`, x.plan, "%s must read the parked through their index:\n%s", name, x.plan)
		require.NotContains(t, x.plan, "Seq Scan on intents", "%s reads every intent:\n%s", name, x.plan)
		require.NotContains(t, x.plan, "intents_pkey", "%s reads every intent:\n%s", name, x.plan)
	}
	// A human's verdict changes one parked intent: by primary key, never through the index
	// every parking writes into (docs/design.md#the-sql-dialect).
	require.ErrorIs(t, func() error {
		_, err := q.IntentResolve(e.ctx, dbsqlc.IntentResolveParams{DeliveryKey: make([]byte, 32), ToState: "failed", Reason: "operator_failed", Actor: "a", Detail: []byte("{}")})
		return err
	}(), errExplained)
	require.Contains(t, x.plan, "intents_pkey", "IntentResolve must reach the intent by primary key:\n%s", scans(x.plan))
	require.NotRegexp(t, `intents_parked(_at)?_idx`, x.plan, "IntentResolve must not go through an index of the parked:\n%s", scans(x.plan))
}

// scans is the lines of a plan that say how a table is reached (the plans of 128-key batches
// are long, mostly the keys).
func scans(plan string) string {
	var out []string
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "Scan") || strings.Contains(line, "Update on") || strings.Contains(line, "Insert on") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
