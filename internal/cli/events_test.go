package cli_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// withNATS gives the scene an embedded JetStream server with atmost's streams, named by
// ATMOST_NATS_URL as an operator's shell would, and relays the outbox so far.
func (s *scene) withNATS() (jetstream.JetStream, *relay.Relay) {
	s.t.Helper()
	srv := natstest.New(s.t)
	js := srv.Streams(s.t)
	s.env["ATMOST_NATS_URL"] = srv.URL
	return js, relay.New(s.l, js, relay.Config{})
}

func (s *scene) drain(r *relay.Relay) {
	s.t.Helper()
	_, err := r.Drain(s.ctx)
	require.NoError(s.t, err)
}

// eventLines parses events tail --json output.
func eventLines(t *testing.T, out string) []events.Event {
	t.Helper()
	var evs []events.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		e, err := events.Unmarshal([]byte(line))
		require.NoError(t, err, "each line is one event of the published schema: %s", line)
		evs = append(evs, e)
	}
	return evs
}

func TestParkWithANATSServerPublishesItsEventRightAway(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	key := s.submit("stop me")
	_, rel := s.withNATS()
	s.drain(rel)

	res := s.run("park", key.String(), "--reason", "customer asked")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "its event is published on ATMOST_EVENTS")
	require.Zero(t, s.outboxRows(key), "published and removed from the outbox")

	res = s.run("events", "tail", "--subject", "atmost.event.parked.>", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	evs := eventLines(t, res.stdout)
	require.Len(t, evs, 1)
	require.Equal(t, key, evs[0].DeliveryKey)
	require.Equal(t, ledger.Pending, evs[0].From)
	require.Equal(t, "alice", evs[0].Actor)

	// A NATS server that cannot be reached does not undo the change: the relay publishes later.
	other := s.submit("stop me too")
	s.env["ATMOST_NATS_URL"] = "nats://127.0.0.1:1"
	res = s.run("park", other.String(), "--reason", "also", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stderr, "the change is made, but publishing its event failed")
	require.Contains(t, res.stdout, `"event": "outbox"`)
	require.Equal(t, 2, s.outboxRows(other), "its creation and its parking wait for the relay")
}

func TestEventsTailPrintsTheLastEventsAndFilters(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	_, rel := s.withNATS()
	var keys []identity.DeliveryKey
	for _, text := range []string{"a", "b", "c"} {
		keys = append(keys, s.submit(text))
	}
	failed := s.failed("d") // submitted, claimed, authorized, failed
	s.drain(rel)
	require.Equal(t, cli.ExitOK, s.run("retry", failed.String(), "--reason", "back").code)
	s.drain(rel)

	res := s.run("events", "tail", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	requireSnakeCase(t, res.stdout)
	all := eventLines(t, res.stdout)
	require.Len(t, all, 8, "3 creations, 4 transitions of d, its retry")
	require.Equal(t, ledger.ReasonRetried, all[7].Reason)
	require.Equal(t, "alice", all[7].Actor)

	res = s.run("events", "tail", "--limit", "2", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, all[6:], eventLines(t, res.stdout), "the last two, oldest first")

	// The last 2 pending events are not the last 2 events: the filter is applied first.
	res = s.run("events", "tail", "--subject", "atmost.event.pending.*", "--limit", "2", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	pending := eventLines(t, res.stdout)
	require.Len(t, pending, 2)
	require.Equal(t, []atmosttype.Reason{"claimed", "retried"}, []atmosttype.Reason{pending[0].Reason, pending[1].Reason})
	require.Equal(t, failed, pending[1].DeliveryKey)

	res = s.run("events", "tail", "--subject", "atmost.event.pending.>", "--limit", "100")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 6, res.stdout)
	require.Regexp(t, `^\S+Z  atmost\.event\.pending\.\S+\s+`+keys[0].String()+`  \(new\) -> pending\s+submitted\s+test$`, lines[0])
	require.Regexp(t, `failed -> pending\s+retried\s+alice$`, lines[5])

	res = s.run("events", "tail", "--since", "1h", "--limit", "3", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, all[:3], eventLines(t, res.stdout), "from the time on, at most --limit")
	res = s.run("events", "tail", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Empty(t, res.stdout, "nothing after a time in the future")
	res = s.run("events", "tail", "--subject", "atmost.event.published.>")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Empty(t, res.stdout, "nothing matches")
}

// syncBuffer is written by the command's goroutine while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestEventsTailFollowPrintsNewEventsUntilInterrupted(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	_, rel := s.withNATS()
	first := s.submit("first")
	s.drain(rel)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: &stdout, Stderr: &stderr, Env: func(name string) (string, bool) { v, ok := s.env[name]; return v, ok }},
			[]string{"events", "tail", "--follow", "--limit", "5"})
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), first.String()) }, 10*time.Second, 20*time.Millisecond, "the event already there")

	res := s.run("park", first.String(), "--reason", "while watching")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "pending -> parked") }, 10*time.Second, 20*time.Millisecond,
		"the new event, published by park right away: %s", stdout.String())

	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("events tail --follow did not end when interrupted")
	}
	require.Equal(t, 2, strings.Count(stdout.String(), "\n"), stdout.String())
}

func TestEventsTailNamesTheSettingWhenNATSIsUnreachable(t *testing.T) {
	t.Parallel()
	res := run(map[string]string{"ATMOST_NATS_URL": "nats://127.0.0.1:1"}, "events", "tail")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "cannot reach NATS at nats://127.0.0.1:1")
	require.Contains(t, res.stderr, "ATMOST_NATS_URL")

	// A server without the stream: no role has run against it.
	srv := natstest.New(t)
	res = run(map[string]string{"ATMOST_NATS_URL": srv.URL}, "events", "tail")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "has no ATMOST_EVENTS stream")
}

func TestBadEventsCommandLinesExitWithUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events"}, "Usage:"},
		{[]string{"events", "watch"}, `unknown command "watch"`},
		{[]string{"events", "tail", "--subject", "atmost.intent.>"}, "give a filter inside atmost.event.>"},
		{[]string{"events", "tail", "--subject", "atmost.event.>.x"}, "> must be the last token"},
		{[]string{"events", "tail", "--subject", "atmost.event..x"}, "empty token"},
		{[]string{"events", "tail", "--since", "yesterday"}, "RFC 3339"},
		{[]string{"events", "tail", "--since", "-5m"}, "positive duration"},
		{[]string{"events", "tail", "--limit", "0"}, "give 1 to 10000"},
		{[]string{"events", "tail", "--follow", "now"}, `unexpected argument "now"`},
		{[]string{"events", "tail", "--reason", "x"}, "--reason: not a flag of tail"},
	} {
		res := run(map[string]string{"ATMOST_NATS_URL": "nats://127.0.0.1:1"}, tc.args...)
		require.Equal(t, cli.ExitUsage, res.code, "atmost %q: %s", tc.args, res.stderr)
		require.Contains(t, res.stderr, tc.want, "atmost %q", tc.args)
	}
}
