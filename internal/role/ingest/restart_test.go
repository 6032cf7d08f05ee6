package ingest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/events"
)

// proxy stands between the role and PostgreSQL so a test can take the database away (every
// connection dropped, new ones refused) and bring it back, as a server restart would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// The ingest role keeps going through a NATS server restart and a PostgreSQL outage in the
// middle of a stream: every intent published before, during and after ends up in the ledger
// exactly once, and every creation is relayed.
func TestIngestRoleSurvivesNATSAndPostgreSQLRestarts(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	appURL, err := url.Parse(db.AppURL())
	require.NoError(t, err)
	pg := newProxy(t, appURL.Host)
	appURL.Host = pg.ln.Addr().String()
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": appURL.String(), "ATMOST_NATS_URL": srv.URL}, "--relay-interval", "100ms")

	published := 0
	publish := func(n int) {
		t.Helper()
		nc := srv.Connect(t)
		for i := 0; i < n; i++ {
			require.NoError(t, nc.Publish(events.IntentSubject("acct-1"), []byte(post(fmt.Sprintf("restart %d", published)))))
			published++
		}
		require.NoError(t, nc.Flush())
		nc.Close()
	}
	settled := func(phase string) {
		t.Helper()
		var intents, outbox int
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM intents), (SELECT count(*) FROM outbox)`).Scan(&intents, &outbox) == nil &&
				intents == published && outbox == 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: %d of %d intents stored, %d outbox rows left; role log:\n%s", phase, intents, published, outbox, r.Stderr())
	}

	// Ready means the streams exist: only then does a publish land anywhere.
	r.WaitReady(t)
	publish(20)
	settled("before the restarts")

	srv.Restart(t) // NATS goes away and comes back with its store
	publish(20)
	settled("after the NATS restart")

	pg.cut() // PostgreSQL goes away
	publish(20)
	time.Sleep(500 * time.Millisecond) // the role meets the outage and naks
	pg.restore()
	settled("after the PostgreSQL outage")

	var history, creations int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE seq = 1) FROM history`).Scan(&history, &creations))
	require.Equal(t, published, creations, "one creation per intent")
	require.Equal(t, published, history)

	r.Stop(t)
}
