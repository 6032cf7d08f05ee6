package faultproxy_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/tools/chaos/faultproxy"
)

// through starts a proxy with plan in front of the test's database and returns the database
// (reached directly) and a connection through the proxy, on a table t (id int).
func through(t *testing.T, plan faultproxy.Plan) (*dbtest.DB, *pgx.Conn, *faultproxy.Proxy) {
	t.Helper()
	db := dbtest.New(t, dbtest.Empty())
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY)`)
	require.NoError(t, err)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	p, err := faultproxy.Start(faultproxy.Postgres, u.Host, plan)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	q := u.Query()
	q.Set("sslmode", "prefer") // the proxy must answer the TLS request itself
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return db, conn, p
}

func rows(t *testing.T, db *dbtest.DB, id int) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM t WHERE id = $1`, id).Scan(&n))
	return n
}

// A COMMIT whose answer the proxy cuts is committed on the server while the client sees its
// connection end: sent alone by simple query (pgx's Tx.Commit) and inside a pipelined batch by
// the extended protocol, where the Execute names a portal bound from the parsed COMMIT.
func TestACommitCutAfterItWasForwardedIsCommittedAndTheClientSeesAnError(t *testing.T) {
	ctx := context.Background()
	t.Run("simple", func(t *testing.T) {
		db, conn, p := through(t, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterCommit: 1}})
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
		require.NoError(t, err)
		require.Error(t, tx.Commit(ctx), "the client heard nothing back")
		require.Eventually(t, func() bool { return rows(t, db, 1) == 1 }, 10*time.Second, 20*time.Millisecond, "the server committed")
		require.Equal(t, map[faultproxy.Fault]int{faultproxy.CutAfterCommit: 1}, p.Counts())
	})
	t.Run("pipelined", func(t *testing.T) {
		db, conn, p := through(t, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterCommit: 1}})
		b := &pgx.Batch{}
		b.Queue(`BEGIN`)
		b.Queue(`INSERT INTO t VALUES ($1)`, 2)
		// The batch is still running when a connection cut at once would reach pgx, which then
		// cancels it: only a cut at the COMMIT's answer leaves the row committed.
		b.Queue(`SELECT pg_sleep(1)`)
		b.Queue(`COMMIT`)
		err := conn.SendBatch(ctx, b).Close()
		require.Error(t, err, "the client heard nothing back")
		require.Eventually(t, func() bool { return rows(t, db, 2) == 1 }, 10*time.Second, 20*time.Millisecond, "the server committed")
		require.Equal(t, map[faultproxy.Fault]int{faultproxy.CutAfterCommit: 1}, p.Counts())
	})
}

// A connection cut before its COMMIT commits nothing.
func TestACommitCutBeforeItWasForwardedCommitsNothing(t *testing.T) {
	ctx := context.Background()
	db, conn, p := through(t, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutBeforeCommit: 1}})
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	require.Error(t, tx.Commit(ctx))
	time.Sleep(200 * time.Millisecond) // the server's rollback on the closed connection
	require.Zero(t, rows(t, db, 1))
	require.Equal(t, 1, p.Counts()[faultproxy.CutBeforeCommit])
}

// A reset inside a transaction reaches the client as ECONNRESET (read on the socket itself:
// pgx reports any broken connection as closed), and the transaction is rolled back.
func TestAResetInsideATransactionRollsItBack(t *testing.T) {
	db, _, p := through(t, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.Reset: 1}})
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	raw, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer raw.Close()
	fe := pgproto3.NewFrontend(raw, raw)
	user := u.User.Username()
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": user, "database": db.Name}})
	// query sends sql (none: the startup) and reads up to the server's ReadyForQuery.
	query := func(sql string) error {
		if sql != "" {
			fe.Send(&pgproto3.Query{String: sql})
		}
		if err := fe.Flush(); err != nil {
			return err
		}
		for {
			msg, err := fe.Receive()
			if err != nil {
				return err
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				return nil
			}
		}
	}
	require.NoError(t, query(""), "startup")
	require.NoError(t, query(`SELECT 1`), "a statement outside a transaction")
	require.NoError(t, query(`BEGIN`), "BEGIN itself is no statement inside a transaction")
	err = query(`INSERT INTO t VALUES (1)`)
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	time.Sleep(200 * time.Millisecond) // the server's rollback on the reset connection
	require.Zero(t, rows(t, db, 1))
	require.Equal(t, map[faultproxy.Fault]int{faultproxy.Reset: 1}, p.Counts())
}

// A stall after a COMMIT keeps the socket open and the answer back: the row is committed
// while the client still waits, and its COMMIT succeeds once the stall is over. A stall before
// a COMMIT keeps the transaction open as long.
func TestAStallHoldsTheConnectionOpen(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		fault            faultproxy.Fault
		committedInStall bool
	}{{faultproxy.StallAfterCommit, true}, {faultproxy.StallBeforeCommit, false}} {
		t.Run(string(c.fault), func(t *testing.T) {
			stall := 3 * time.Second
			db, conn, p := through(t, faultproxy.Plan{Seed: 1, StallMin: stall, StallMax: stall, Rates: map[faultproxy.Fault]float64{c.fault: 1}})
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
			require.NoError(t, err)
			committed := make(chan error, 1)
			began := time.Now()
			go func() { committed <- tx.Commit(ctx) }()
			time.Sleep(stall / 2)
			select {
			case err := <-committed:
				t.Fatalf("the COMMIT returned within the stall: %v", err)
			default:
			}
			if c.committedInStall {
				require.Equal(t, 1, rows(t, db, 1), "the server committed while the answer was held")
			} else {
				require.Zero(t, rows(t, db, 1), "the COMMIT is held")
			}
			require.NoError(t, <-committed)
			require.GreaterOrEqual(t, time.Since(began), stall)
			require.Equal(t, 1, rows(t, db, 1))
			require.Equal(t, 1, p.Counts()[c.fault])
		})
	}
}

// Once the faults stop, nothing is done to any connection.
func TestNoFaultAfterTheFaultsStopped(t *testing.T) {
	ctx := context.Background()
	db, conn, p := through(t, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterCommit: 1}})
	p.StopFaults()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, rows(t, db, 1))
	require.Empty(t, p.Counts())
}

// A JetStream publish cut after the proxy forwarded it is stored while the publisher hears no
// acknowledgement; a message the connection was cut after reached the subscriber.
func TestNATSCutAfterPublishAndAfterMessage(t *testing.T) {
	ctx := context.Background()
	srv := natstest.New(t)
	js := srv.Streams(t)
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)

	p, err := faultproxy.Start(faultproxy.NATS, target.Host, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterPublish: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	nc, err := nats.Connect("nats://"+p.Addr(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	pjs, err := jetstream.New(nc)
	require.NoError(t, err)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pjs.Publish(pctx, "atmost.intent.cut", []byte(`{}`))
	require.Error(t, err, "no acknowledgement")
	s, err := js.Stream(ctx, "ATMOST_INTENTS")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1
	}, 10*time.Second, 20*time.Millisecond, "the server stored what was forwarded")
	require.Equal(t, 1, p.Counts()[faultproxy.CutAfterPublish])

	m, err := faultproxy.Start(faultproxy.NATS, target.Host, faultproxy.Plan{Seed: 1, Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterMessage: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	cut := make(chan struct{}, 1)
	// It reconnects, as every role does: a closed connection would drop its pending messages.
	sub, err := nats.Connect("nats://"+m.Addr(), nats.ReconnectWait(50*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { cut <- struct{}{} }))
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	got := make(chan []byte, 1)
	_, err = sub.Subscribe("chaos.core", func(msg *nats.Msg) { got <- msg.Data })
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	direct := srv.Connect(t)
	require.NoError(t, direct.Publish("chaos.core", []byte("hello")))
	select {
	case data := <-got:
		require.Equal(t, "hello", string(data))
	case <-time.After(5 * time.Second):
		t.Fatal("the message was not delivered")
	}
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not cut")
	}
	require.Equal(t, 1, m.Counts()[faultproxy.CutAfterMessage])
}

// A plan naming a fault of the other protocol, or a rate outside [0, 1], is refused.
func TestAPlanIsChecked(t *testing.T) {
	_, err := faultproxy.Start(faultproxy.NATS, "127.0.0.1:1", faultproxy.Plan{Rates: map[faultproxy.Fault]float64{faultproxy.CutAfterCommit: 0.1}})
	require.Error(t, err)
	_, err = faultproxy.Start(faultproxy.Postgres, "127.0.0.1:1", faultproxy.Plan{Rates: map[faultproxy.Fault]float64{faultproxy.Delay: 2}})
	require.Error(t, err)
}
