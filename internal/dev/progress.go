package dev

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// progress prints one line a second while the demo runs: what the producer published, the
// intents by state, and the rate at which they reach a final state.
type progress struct {
	out      io.Writer
	pool     *pgxpool.Pool
	start    time.Time
	produced atomic.Int64
	done     chan struct{}
	stopped  sync.WaitGroup
	once     sync.Once
}

func newProgress(out io.Writer, pool *pgxpool.Pool, start time.Time) *progress {
	p := &progress{out: out, pool: pool, start: start, done: make(chan struct{})}
	p.stopped.Add(1)
	return p
}

func (p *progress) run(ctx context.Context) {
	defer p.stopped.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.done:
			return
		case <-t.C:
		}
		var pending, authorized, published, failed, indeterminate, parked, rejects int
		err := p.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'authorized'),
			count(*) FILTER (WHERE state = 'published'), count(*) FILTER (WHERE state = 'failed'),
			count(*) FILTER (WHERE state = 'indeterminate'), count(*) FILTER (WHERE state = 'parked'),
			(SELECT count(*) FROM rejects)
			FROM intents`).Scan(&pending, &authorized, &published, &failed, &indeterminate, &parked, &rejects)
		if err != nil {
			continue
		}
		elapsed := time.Since(p.start)
		fmt.Fprintf(p.out, "%6s  published %5d  pending %5d  authorized %4d  failed %4d  indeterminate %3d  parked %4d  | produced %5d, rejected %3d  (%.0f/s)\n",
			elapsed.Round(time.Second), published, pending, authorized, failed, indeterminate, parked, p.produced.Load(), rejects,
			float64(published+failed+parked)/elapsed.Seconds())
	}
}

func (p *progress) stop() {
	p.once.Do(func() { close(p.done) })
	p.stopped.Wait()
}
