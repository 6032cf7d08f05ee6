// Package firstintent runs a newcomer's first hour as the documents write it: the commands of
// README.md's "Your first intent", of the TypeScript agent's README (examples/ts-agent) and of
// producers.md's "Your first intent, refused then replayed", extracted from the documents and
// run as they are, against `atmost dev` on a fresh ledger, so that the path from a clone to "my
// own intent is published" cannot rot.
package firstintent

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// defaultSim is the simulator's address as the documents name it, atmost dev's default. The
// test moves every port of dev (others' tests and servers share the machine) and replaces the
// address in the documents' commands by where dev serves it, as a reader who moved it does.
// Nothing else of a command changes; the moved NATS port comes in through the export dev prints.
const defaultSim = "127.0.0.1:9300"

// step is one command of a document's block and the exit code its comment promises ("# exits
// 1: ..."), 0 when it promises none.
type step struct {
	line string
	exit int
}

var exits = regexp.MustCompile(`#\s*exits (\d+)`)

// block returns the commands of the sh block between <!-- name:start --> and <!-- name:end -->.
func block(t *testing.T, doc, name string) []step {
	t.Helper()
	b, err := os.ReadFile(doc)
	require.NoError(t, err)
	text := string(b)
	start, end := strings.Index(text, "<!-- "+name+":start -->"), strings.Index(text, "<!-- "+name+":end -->")
	require.True(t, start >= 0 && end > start, "%s has no %s block", doc, name)
	body := text[start:end]
	body = body[strings.Index(body, "```sh\n")+len("```sh\n"):]
	body = body[:strings.Index(body, "```")]
	var steps []step
	for l := range strings.Lines(body) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		s := step{line: l}
		if m := exits.FindStringSubmatch(l); m != nil {
			s.exit, _ = strconv.Atoi(m[1])
		}
		steps = append(steps, s)
	}
	require.NotEmpty(t, steps, "%s: the %s block has no command", doc, name)
	return steps
}

// lockedBuffer is dev's output, written by its process while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTheFirstIntentAsTheDocumentsWriteIt(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	readme := block(t, filepath.Join(root, "README.md"), "first-intent")
	refusal := block(t, filepath.Join(root, "docs", "producers.md"), "first-refusal")
	agent := block(t, filepath.Join(root, "examples", "ts-agent", "README.md"), "ts-agent")
	db := dbtest.New(t, dbtest.Empty())

	// A clone as make dev leaves it: the repository's files, and the binaries in bin/.
	clone := t.TempDir()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		switch e.Name() {
		case "bin", ".git":
			continue
		case "clients", "examples":
			// Copies, with their installed npm packages: the TypeScript agent's commands build
			// into them, and the TypeScript client's own test builds the repository's at the
			// same time.
			out, err := exec.Command("cp", "-a", filepath.Join(root, e.Name()), filepath.Join(clone, e.Name())).CombinedOutput()
			require.NoError(t, err, "cp: %s", out)
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(root, e.Name()), filepath.Join(clone, e.Name())))
	}
	build := exec.Command("go", "build", "-o", filepath.Join(clone, "bin")+string(filepath.Separator), "./cmd/atmost")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	// The newcomer's environment: none of atmost's variables but the ledger's, which make dev
	// and the second terminal both read (its default, the local server's atmost, in their case).
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ATMOST_") {
			env = append(env, kv)
		}
	}
	env = append(env, "ATMOST_DATABASE_URL="+db.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dev := exec.CommandContext(ctx, filepath.Join(clone, "bin", "atmost"), "dev", "--nats-port", "0", "--data-dir", t.TempDir(),
		"--log", filepath.Join(t.TempDir(), "roles.log"), "--sim", "127.0.0.1:0", "--console", "127.0.0.1:0",
		"--ingest-http-addr", "127.0.0.1:0", "--dispatcher-http-addr", "127.0.0.1:0", "--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0")
	dev.Dir, dev.Env = clone, env
	dev.Cancel = func() error { return dev.Process.Signal(os.Interrupt) }
	var devOut, devErr lockedBuffer
	dev.Stdout, dev.Stderr = &devOut, &devErr
	require.NoError(t, dev.Start())
	stopped := make(chan error, 1)
	go func() { stopped <- dev.Wait() }()
	t.Cleanup(func() {
		_ = dev.Process.Signal(os.Interrupt)
		<-stopped
	})
	require.Eventually(t, func() bool {
		select {
		case err := <-stopped:
			stopped <- err
			return true
		default:
		}
		return strings.Contains(devOut.String(), "running; Ctrl-C")
	}, 3*time.Minute, 100*time.Millisecond)
	printed := devOut.String()
	require.Contains(t, printed, "running; Ctrl-C", "atmost dev did not start: %s\n%s", printed, devErr.String())
	require.Contains(t, printed, "account sim-1: created on the platform simulator", "a fresh ledger gets its account")
	sim := regexp.MustCompile(`(?m)^platform simulator: http://(\S+) `).FindStringSubmatch(printed)
	require.NotNil(t, sim, printed)

	// What dev says to run next is the README's block, after the exports it prints for the
	// ports it moved: the reader pastes those, then the README's commands.
	var said []string
	sc := bufio.NewScanner(strings.NewReader(printed[strings.Index(printed, "next, in another terminal"):]))
	for sc.Scan() && (len(said) == 0 || strings.HasPrefix(sc.Text(), "  ")) {
		l := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "export ") {
			env = append(env, strings.TrimPrefix(k, "export ")+"="+v)
			continue
		}
		if strings.HasPrefix(sc.Text(), "  ") {
			said = append(said, l)
		}
	}
	var documented []string
	for _, s := range readme {
		documented = append(documented, s.line)
	}
	require.Equal(t, documented, said, "atmost dev's next steps and README.md's first-intent block differ")
	require.Contains(t, strings.Join(env, "\n"), "\nATMOST_NATS_URL=nats://127.0.0.1:", "dev moved the NATS port and printed its export")

	run := func(doc string, s step) string {
		t.Helper()
		line := strings.ReplaceAll(s.line, defaultSim, sim[1])
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = clone, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		require.Equal(t, s.exit, code, "%s: %s\nerr: %v\nstdout: %s\nstderr: %s\ndev: %s\n%s", doc, s.line, err, &stdout, &stderr, devOut.String(), devErr.String())
		return stdout.String() + stderr.String()
	}

	published := regexp.MustCompile(`(?m)^published published \(done\) \S+$`)
	got := run("README.md", readme[0])
	require.Regexp(t, published, got, "the README's producer saw its own intent published")
	require.Contains(t, run("README.md", readme[1]), "sim-1", "events tail shows the intent's transitions")

	// The TypeScript agent, as its README runs it: built, then its own first intent.
	run("examples/ts-agent/README.md", agent[0])
	require.Regexp(t, published, run("examples/ts-agent/README.md", agent[1]), "the TypeScript agent saw its intent published")

	t.Logf("dev printed:\n%s", printed)
	got = run("producers.md", refusal[0])
	t.Logf("refused:\n%s", got)
	require.Contains(t, got, "unknown_account")
	require.Contains(t, got, "`atmost rejects replay --account acct-42`", "the refusal names its remedy")
	for _, s := range refusal[1 : len(refusal)-1] {
		run("producers.md", s)
	}
	require.Regexp(t, published, run("producers.md", refusal[len(refusal)-1]), "the replayed intent, published")
}
