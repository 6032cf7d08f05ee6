package ingest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/ledger"
)

// TestIngestKilledBetweenCommitAndAck runs an ingester in a subprocess that SIGKILLs itself
// right after the ledger committed a batch and before a single acknowledgement. JetStream
// redelivers the whole batch to the next ingester: nothing is lost and nothing is doubled.
func TestIngestKilledBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const intents = 40
	for i := 0; i < intents; i++ {
		e.publish("acct-1", post(fmt.Sprintf("crash %d", i)), nil)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashingIngester$", "-test.v")
	cmd.Env = append(os.Environ(), "ATMOST_CRASH_DB="+e.DB.AppURL(), "ATMOST_CRASH_NATS="+e.NATSURL)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the subprocess must die, not finish: %s", out)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "%s", out)
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM intents`), "the batch was committed before the kill")

	// The next ingester gets the batch again once the AckWait of the crashed one runs out.
	l, err := ledger.New(e.DB.AppPool(t), ledger.Config{Actor: "ingest-2"})
	require.NoError(t, err)
	in, err := ingest.New(e.Ctx, e.JS, l, ingest.Config{Batch: intents, AckWait: time.Second, MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)
	var got ingest.Stats
	deadline := time.Now().Add(15 * time.Second)
	for got.Duplicates < intents && time.Now().Before(deadline) {
		s, err := in.Batch(e.Ctx)
		require.NoError(t, err)
		got.Created += s.Created
		got.Duplicates += s.Duplicates
	}
	require.Equal(t, ingest.Stats{Duplicates: intents}, got, "every redelivery is a duplicate")
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM history`))
}

// TestCrashingIngester is the subprocess of TestIngestKilledBetweenCommitAndAck; run alone it
// does nothing.
func TestCrashingIngester(t *testing.T) {
	dbURL, natsURL := os.Getenv("ATMOST_CRASH_DB"), os.Getenv("ATMOST_CRASH_NATS")
	if dbURL == "" || natsURL == "" {
		return // not the subprocess
	}
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	l, err := ledger.New(mustPool(t, dbURL), ledger.Config{Actor: "ingest-1"})
	require.NoError(t, err)
	ingest.SetCrash(func(step string) {
		if step == "after-commit" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the kill arrives
		}
	})
	in, err := ingest.New(ctx, js, l, ingest.Config{Batch: 100, AckWait: time.Second, MaxWait: 500 * time.Millisecond})
	require.NoError(t, err)
	_, _ = in.Batch(ctx)
	t.Fatal("the ingester should have been killed after its commit")
}
