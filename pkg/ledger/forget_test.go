package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// removals records what ForgetLater's callback was told.
type removals struct {
	mu   sync.Mutex
	rows []ledger.Unpublished
}

func (r *removals) removed(rows []ledger.Unpublished) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, rows...)
}

func (r *removals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rows)
}

// outboxOf is the outbox rows of key.
func (e *env) outboxOf(key identity.DeliveryKey) int {
	return e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1`, key.Bytes())
}

// At READ COMMITTED, rows a writer forgets leave the outbox with its next write, in that
// write's transaction, and the callback names them once.
func TestForgottenRowsLeaveWithTheNextWrite(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	ledger.SetForgetDelay(e.l, time.Hour) // only the write removes them
	key := e.submit("forget me")
	rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	var r removals
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, r.removed))
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, r.removed), "the same row forgotten twice")
	require.Equal(t, 1, e.outboxOf(key), "nothing removed before a write")

	begun, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{{Key: key, RequestHash: requestHash("r")}}, lease)
	require.NoError(t, err)
	require.NoError(t, begun[0].Err)
	require.Equal(t, 1, e.outboxOf(key), "the submitted row left with Begin; its claim waits")
	require.Zero(t, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = 1`, key.Bytes()))
	require.Equal(t, rows, r.rows, "named once, though forgotten twice")
}

// Without a write to carry them, forgotten rows leave on their own within ForgetDelay.
func TestForgottenRowsLeaveOnTheirOwnWithoutAWrite(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	key := e.submit("forget me alone")
	rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
	require.NoError(t, err)
	var r removals
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, r.removed))
	require.Eventually(t, func() bool { return e.outboxOf(key) == 0 && r.count() == 1 }, 10*time.Second, 10*time.Millisecond)
}

// A write that does not commit takes no forgotten row with it: they stay in the outbox, queued,
// and a later removal takes them.
func TestForgottenRowsStayWhenTheWriteFails(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	ledger.SetForgetDelay(e.l, time.Hour) // only the calls below remove them
	key := e.submit("forget me later")
	rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
	require.NoError(t, err)
	var r removals
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, r.removed))
	gone, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = e.l.BeginMany(gone, []ledger.BeginRequest{{Key: key, RequestHash: requestHash("r")}}, lease)
	require.Error(t, err)
	require.Equal(t, 1, e.outboxOf(key))
	require.Zero(t, r.count())
	require.NoError(t, e.l.FlushForgotten(e.ctx))
	require.Zero(t, e.outboxOf(key))
	require.Equal(t, rows, r.rows)
}

// At SERIALIZABLE a delete in the writers' transactions would take predicate locks on the
// outbox: ForgetLater removes at once, in a transaction of its own.
func TestForgottenRowsLeaveAtOnceWhenSerializable(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.Serializable)
	key := e.submit("forget me now")
	rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
	require.NoError(t, err)
	var r removals
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, r.removed))
	require.Zero(t, e.outboxOf(key))
	require.Equal(t, rows, r.rows)

	// A writer that counts nothing passes no callback, as at READ COMMITTED.
	other := e.submit("forget me now, uncounted")
	rows, err = e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{other})
	require.NoError(t, err)
	require.NoError(t, e.l.ForgetLater(e.ctx, rows, nil))
	require.Zero(t, e.outboxOf(other))
}

// Two removals of the same outbox rows (ingest's and a dispatcher's of a submission both
// published, a writer's and a relay round's) wait for each other and never deadlock: each
// locks its rows in key order, whatever the outbox holds when its plan is made, a removal of
// its own (Published) as one carried ahead of a hot write (ForgetLater). Through the
// primary key a delete takes them in key order; on an outbox of many rows PostgreSQL plans a
// bitmap scan, which takes them in the heap's, and two removals planned the two ways
// deadlocked (PostgreSQL broke each cycle after deadlock_timeout, a second). Here the heap
// holds the two rows the other way round, and a transaction holds the first in key order:
// the removal waits for it holding nothing else.
func TestARemovalOfOutboxRowsLocksThemInKeyOrder(t *testing.T) {
	t.Parallel()
	for _, carried := range []bool{false, true} {
		t.Run(fmt.Sprintf("carried=%t", carried), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, pgx.ReadCommitted)
			ledger.SetForgetDelay(e.l, time.Hour) // the removal waits for the write, never flushed alone
			a, b := envelope(t, account, "removed in key order, a"), envelope(t, account, "removed in key order, b")
			if bytes.Compare(a.DeliveryKey().Bytes(), b.DeliveryKey().Bytes()) > 0 {
				a, b = b, a
			}
			for _, env := range []identity.Envelope{b, a} {
				_, err := e.l.Submit(e.ctx, []identity.Envelope{env})
				require.NoError(t, err)
			}
			rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{a.DeliveryKey(), b.DeliveryKey()})
			require.NoError(t, err)
			require.Len(t, rows, 2)
			// An outbox of many rows, as a busy pipeline's or a stalled relay's, analyzed as such.
			e.exec(`INSERT INTO outbox (delivery_key, seq, dispatch)
				SELECT sha256(convert_to('waiting ' || g, 'UTF8')), 1, false FROM generate_series(1, 20000) g`)
			e.exec(`ANALYZE outbox`)

			holder, err := e.pool.Begin(e.ctx)
			require.NoError(t, err)
			defer func() { _ = holder.Rollback(e.ctx) }()
			_, err = holder.Exec(e.ctx, `SELECT 1 FROM outbox WHERE delivery_key = $1 FOR UPDATE`, a.DeliveryKey().Bytes())
			require.NoError(t, err)

			removed := make(chan []ledger.Unpublished, 1)
			go func() {
				if !carried {
					gone, err := e.l.Published(e.ctx, rows)
					assert.NoError(t, err)
					removed <- gone
					return
				}
				var gone []ledger.Unpublished
				assert.NoError(t, e.l.ForgetLater(e.ctx, rows, func(r []ledger.Unpublished) { gone = append(gone, r...) }))
				_, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "the write that carries the removal")})
				assert.NoError(t, err)
				removed <- gone
			}()
			require.Eventually(t, func() bool {
				return e.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
			}, 10*time.Second, 5*time.Millisecond, "the removal waits for the first row")
			probe, err := e.pool.Begin(e.ctx)
			require.NoError(t, err)
			defer func() { _ = probe.Rollback(e.ctx) }()
			_, err = probe.Exec(e.ctx, `SELECT 1 FROM outbox WHERE delivery_key = $1 FOR UPDATE NOWAIT`, b.DeliveryKey().Bytes())
			require.NoError(t, err, "the removal waiting for the first row in key order holds no later one")
			require.NoError(t, probe.Rollback(e.ctx))

			require.NoError(t, holder.Commit(e.ctx))
			gone := <-removed
			require.Len(t, gone, 2, "both rows removed once the first was free")
		})
	}
}
