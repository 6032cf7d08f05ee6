package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// postArgs is River's job: one intent.
type postArgs struct {
	Account string `json:"account"`
	Key     string `json:"key"`
	Text    string `json:"text"`
}

// Kind names the job's worker.
func (postArgs) Kind() string { return "post" }

// postWorker is the at-least-once pipeline's worker, as its user would write it: post with
// the delivery key as Idempotency-Key, read the created object back, and return an error on
// anything else, so that River tries the job again later (up to 25 attempts; -river-retry
// sets the delay). Nothing remembers what an earlier attempt may have created.
type postWorker struct {
	river.WorkerDefaults[postArgs]
	base string
	http *http.Client
	done atomic.Int64 // jobs whose work succeeded
}

func (w *postWorker) Work(ctx context.Context, job *river.Job[postArgs]) error {
	body, err := json.Marshal(map[string]string{"text": job.Args.Text})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+"/v1/accounts/"+url.PathEscape(job.Args.Account)+"/post", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", job.Args.Key)
	req.Header.Set("Content-Type", "application/json")
	// net/http would send a request that carries an Idempotency-Key again by itself when a
	// reused connection fails before an answer (it rewinds the body with GetBody): without
	// GetBody it cannot, so every second create is River's retry, as the comparison means.
	req.GetBody = nil
	var created platformsim.Object
	if err := w.exchange(req, http.StatusCreated, &created); err != nil {
		return fmt.Errorf("post: %w", err)
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, w.base+"/v1/objects/"+url.PathEscape(created.ID), nil)
	if err != nil {
		return err
	}
	var read platformsim.Object
	if err := w.exchange(req, http.StatusOK, &read); err != nil {
		return fmt.Errorf("read back %s: %w", created.ID, err)
	}
	if read.Text != job.Args.Text {
		return fmt.Errorf("read back %s: text %q, posted %q", created.ID, read.Text, job.Args.Text)
	}
	w.done.Add(1)
	return nil
}

// exchange sends req and decodes a JSON answer of status want into v.
func (w *postWorker) exchange(req *http.Request, want int, v any) error {
	resp, err := w.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// riverStack is River's side of a run: a fresh database migrated by rivermigrate, a client
// with one queue and the worker above, and the platform simulator.
type riverStack struct {
	db      *database
	sim     *platformsim.Server
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	worker  *postWorker
	stopSim context.CancelFunc
}

func startRiver(ctx context.Context, o options, cfg platformsim.Config, logs io.Writer) (_ *riverStack, err error) {
	s := &riverStack{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.sim, err = platformsim.New(cfg); err != nil {
		return nil, err
	}
	sctx, stopSim := context.WithCancel(ctx)
	s.stopSim = stopSim
	simURL, _, err := s.sim.Serve(sctx, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("platform simulator: %w", err)
	}
	if s.db, err = createDatabase(ctx, o.adminURL, "river"); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(s.db.url)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = int32(o.riverConns)
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, err
	}
	driver := riverpgxv5.New(s.pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate River's tables: %w", err)
	}
	s.worker = &postWorker{base: simURL, http: &http.Client{
		Timeout:   10 * time.Second, // atmost's send timeout
		Transport: &http.Transport{MaxIdleConns: o.riverWork, MaxIdleConnsPerHost: o.riverWork, IdleConnTimeout: 90 * time.Second},
	}}
	workers := river.NewWorkers()
	river.AddWorker(workers, s.worker)
	var retry river.ClientRetryPolicy // nil: River's default
	if o.riverRetry > 0 {
		retry = constantRetry(o.riverRetry)
	}
	s.client, err = river.NewClient(driver, &river.Config{
		RetryPolicy:       retry,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.riverWork}},
		Workers:           workers,
		FetchCooldown:     o.riverFetch,
		FetchPollInterval: max(o.riverFetch, river.FetchPollIntervalDefault),
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	if err := s.client.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// constantRetry tries a failed job again after the same delay every time. River's default
// waits attempt⁴ seconds (1 s, 16 s, 81 s...), so the few jobs that fail twice or three times
// would set a faulty run's length; a constant delay as short as atmost's reconcile delay keeps
// the two sides' rates comparable.
type constantRetry time.Duration

// NextRetry is when the failed job runs again.
func (d constantRetry) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(d))
}

// insert adds the intents as jobs, batch at a time, as a producer that takes its intents in
// batches would.
func (s *riverStack) insert(ctx context.Context, intents []intent, batch int) error {
	params := make([]river.InsertManyParams, 0, batch)
	for i, in := range intents {
		params = append(params, river.InsertManyParams{Args: postArgs{Account: account, Key: in.key.String(), Text: in.text}})
		if len(params) == batch || i == len(intents)-1 {
			if _, err := s.client.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("insert jobs: %w", err)
			}
			params = params[:0]
		}
	}
	return nil
}

// settle waits until n jobs have completed in River's table: the worker's own count first (it
// costs nothing), then the table, as atmost's side waits for its ledger.
func (s *riverStack) settle(ctx context.Context, n int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out (-timeout)")
		}
		return nil
	}
	for s.worker.done.Load() < int64(n) {
		if err := wait(); err != nil {
			return time.Time{}, fmt.Errorf("%d of %d jobs worked: %w", s.worker.done.Load(), n, err)
		}
	}
	for {
		var completed int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
			return time.Time{}, err
		}
		if completed >= n {
			return time.Now(), nil
		}
		if err := wait(); err != nil {
			return time.Time{}, fmt.Errorf("%d of %d jobs completed: %w", completed, n, err)
		}
	}
}

// attempts is the number of times River ran the jobs, failed runs included.
func (s *riverStack) attempts(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(attempt), 0) FROM river_job`).Scan(&n)
	return n, err
}

func (s *riverStack) close() {
	if s.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.client.Stop(ctx)
		cancel()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.stopSim != nil {
		s.stopSim()
	}
	if s.db != nil {
		_ = s.db.drop()
	}
}
