package dispatch_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// A dispatcher SIGKILLed at each step of the send path: the platform's count for the key is at
// most one, and the intent ends in the state the step declares once leases expire (the
// sweeper's ExpireLeases, run here by the test) and another dispatcher takes the work.
func TestADispatcherKilledAtEachStepSendsAtMostOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step    string
		state   ledger.State
		reason  ledger.Reason
		created int
	}{
		// Killed holding a claim: nothing sent; the claim expires (abandoned) and the next
		// dispatcher sends once.
		{"after-begin", ledger.Published, ledger.ReasonPublished, 1},
		// Killed authorized, before the first byte: nothing sent, but the ledger cannot know
		// that; the in-flight lease expires into indeterminate, never back to pending.
		{"after-authorize", ledger.Indeterminate, ledger.ReasonLeaseExpired, 0},
		// Killed witnessed, at the first byte's door: the same, nothing sent, indeterminate.
		{"before-send", ledger.Indeterminate, ledger.ReasonLeaseExpired, 0},
		// Killed after sending, before Complete: one object; indeterminate by expiry.
		{"after-send", ledger.Indeterminate, ledger.ReasonLeaseExpired, 1},
		// Killed after Complete, before the ack: published; the redelivered work is ignored.
		{"after-complete", ledger.Published, ledger.ReasonPublished, 1},
	} {
		t.Run(c.step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, platformsim.Config{})
			key := e.Submit("acct-1", "crash at "+c.step)[0]
			child := e.child(c.step, "kill")
			err := child.Wait()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the subprocess must die: %s", child.output())
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "%s", child.output())

			e.sweep()
			e.run(e.config())
			in := e.settle([]identity.DeliveryKey{key}, 30*time.Second)[key]
			require.Equal(t, c.state, in.State)
			require.Equal(t, c.reason, in.Reason)
			e.drained()
			e.requireCreated(key, c.created, child)
			require.LessOrEqual(t, e.sim.Received(key.String()), 1)
		})
	}
}

// A zombie: a dispatcher stopped (SIGSTOP) past its lease while its work is redelivered, then
// resumed (SIGCONT). It is fenced out before it sends.
func TestAZombieDispatcherIsFencedOutBeforeItSends(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step    string
		state   ledger.State
		reason  ledger.Reason
		created int
	}{
		// Stopped holding a claim: another dispatcher takes over once the claim expired and
		// sends; the zombie's Authorize is refused.
		{"after-begin", ledger.Published, ledger.ReasonPublished, 1},
		// Stopped authorized: its send deadline passes while it sleeps; it wakes and sends
		// nothing; the lease expired into indeterminate.
		{"after-authorize", ledger.Indeterminate, ledger.ReasonLeaseExpired, 0},
		// Stopped witnessed, at the first byte's door: it wakes past its send deadline and
		// sends nothing (the dispatcher's own deadline check).
		{"before-send", ledger.Indeterminate, ledger.ReasonLeaseExpired, 0},
	} {
		t.Run(c.step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, platformsim.Config{})
			key := e.Submit("acct-1", "zombie at "+c.step)[0]
			child := e.child(c.step, "stop")
			require.Eventually(t, child.stopped, 20*time.Second, 10*time.Millisecond, "the subprocess never reached %s: %s", c.step, child.output())

			// Past every lease of the zombie, then the others do their work.
			time.Sleep(ledger.MinLease + time.Second)
			e.sweep()
			e.run(e.config())
			in := e.settle([]identity.DeliveryKey{key}, 30*time.Second)[key]
			require.Equal(t, c.state, in.State)

			// The zombie wakes, carries on from where it stopped, and is stopped for good.
			require.NoError(t, child.cmd.Process.Signal(syscall.SIGCONT))
			time.Sleep(time.Second)
			require.NoError(t, child.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, child.Wait(), "the zombie exits cleanly: %s", child.output())
			require.Contains(t, child.output(), "resumed at "+c.step)

			in, err := e.Ledger.Get(e.Ctx, key)
			require.NoError(t, err)
			require.Equal(t, c.state, in.State, "the zombie changed nothing")
			require.Equal(t, c.reason, in.Reason)
			e.requireCreated(key, c.created, child)
			require.Equal(t, c.created, e.sim.Received(key.String()), "the zombie sent nothing")
		})
	}
}

// requireCreated requires that the platform holds want objects of key; when it does not, the
// test's log says who sent and when: each attempt's evidence and the subprocess's output.
func (e *env) requireCreated(key identity.DeliveryKey, want int, child *subprocess) {
	e.T.Helper()
	if got := e.sim.Created(key.String()); got != want {
		rec, err := e.Ledger.Inspect(e.Ctx, key)
		require.NoError(e.T, err)
		for _, ev := range rec.Evidence {
			e.T.Logf("evidence of %s: %s %s %s", ev.Token, ev.Result, ev.Reason, ev.Detail)
		}
		e.T.Fatalf("the platform holds %d objects of %s, want %d; %d attempts; the subprocess's output:\n%s",
			got, key, want, len(rec.Attempts), child.output())
	}
}

// sweep expires leases every 200 ms until the test ends: the sweeper's part.
func (e *env) sweep() {
	go func() {
		for e.Ctx.Err() == nil {
			_, _ = e.Ledger.ExpireLeases(e.Ctx, 100)
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

type subprocess struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// lockedBuffer is the subprocess's output, written by exec's copying goroutine and read by
// the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Wait waits for the process to exit, at most a minute (then it is killed and Wait fails with
// the process's output).
func (s *subprocess) Wait() error {
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump into the output
		<-done
		return fmt.Errorf("the subprocess did not exit within a minute:\n%s", s.output())
	}
}
func (s *subprocess) output() string { return s.out.String() }

// stopped reports whether the process is stopped (SIGSTOP): state T in /proc/<pid>/stat.
func (s *subprocess) stopped() bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "T"
}

// child runs TestCrashingDispatcher in a subprocess that kills or stops itself at step.
func (e *env) child(step, action string) *subprocess {
	e.T.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashingDispatcher$", "-test.v")
	cmd.Env = append(os.Environ(), "ATMOST_CRASH_DB="+e.DB.AppURL(), "ATMOST_CRASH_NATS="+e.NATSURL,
		"ATMOST_CRASH_STEP="+step, "ATMOST_CRASH_ACTION="+action)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(e.T, cmd.Start())
	e.T.Cleanup(func() { _ = cmd.Process.Kill() })
	return &subprocess{cmd: cmd, out: out}
}

// TestCrashingDispatcher is the subprocess of the crash and zombie tests; run alone it does
// nothing.
func TestCrashingDispatcher(t *testing.T) {
	dbURL, natsURL, step, action := os.Getenv("ATMOST_CRASH_DB"), os.Getenv("ATMOST_CRASH_NATS"), os.Getenv("ATMOST_CRASH_STEP"), os.Getenv("ATMOST_CRASH_ACTION")
	if dbURL == "" || natsURL == "" {
		return // not the subprocess
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	l, err := ledger.New(pool, ledger.Config{Actor: "dispatcher-1"})
	require.NoError(t, err)
	var once sync.Once
	dispatch.SetCrash(func(at string) {
		if at != step {
			return
		}
		fired := false
		once.Do(func() { fired = true })
		if !fired {
			return // a zombie stops once
		}
		fmt.Fprintf(os.Stderr, "reached %s\n", at)
		switch action {
		case "kill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the kill arrives
		case "stop":
			stopSelf()
			fmt.Fprintf(os.Stderr, "resumed at %s\n", at)
		}
	})
	var e env // only its configuration: the child has a ledger and a broker of its own
	d, err := dispatch.New(ctx, js, l, relay.New(l, js, relay.Config{}), e.config())
	require.NoError(t, err)
	require.NoError(t, d.Run(ctx))
	if action == "kill" {
		t.Fatal("the dispatcher should have been killed at " + step)
	}
}
