package blueskylane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns the lane's skip into a failure: where
// it is "1" (make test-bluesky), or where CI is "true", a missing Node 22 or missing PDS
// packages fail the test.
const RequireEnv = "ATMOST_BLUESKY_LANE"

// Required reports whether a missing PDS is a failure here rather than a skip.
func Required() bool { return os.Getenv(RequireEnv) == "1" || os.Getenv("CI") == "true" }

// SkipMessage is what the lane says where it cannot run.
const SkipMessage = "the Bluesky lane needs Node 22 and the PDS packages: run make test-bluesky (scripts/bluesky-pds/install)"

// startTimeout bounds the launcher's start: a PLC, a PDS and two accounts.
const startTimeout = 90 * time.Second

// PDS is a running reference PDS with two accounts: the lane's (Handle, DID, and an app
// Password) and a second one (FriendDID) to follow.
type PDS struct {
	// URL is the PDS's base URL on loopback, e.g. http://127.0.0.1:41234.
	URL          string `json:"pds"`
	Handle       string `json:"handle"`
	DID          string `json:"did"`
	Password     string `json:"password"`
	FriendHandle string `json:"friend_handle"`
	FriendDID    string `json:"friend_did"`
}

// Start runs scripts/bluesky-pds/start.mjs with Node 22 and returns the PDS it started, which
// stops when the test ends. Where Node 22 or the packages are absent it skips the test with
// SkipMessage (fails it where Required).
func Start(t testing.TB) *PDS {
	t.Helper()
	node, dir, err := locate()
	if err != nil {
		if Required() {
			t.Fatalf("%s: %v", SkipMessage, err)
		}
		t.Skipf("%s (%v)", SkipMessage, err)
	}
	cmd := exec.Command(node, "start.mjs")
	cmd.Dir = dir
	// A temporary directory of its own: the PDS keeps its databases and blobs there, and
	// dev-env's port reservations (a lock directory in the temporary directory) race between
	// launchers started at once.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "NODE_ENV=development", "LOG_ENABLED=false")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ready := &firstLine{done: make(chan []byte, 1)}
	cmd.Stdout = ready
	stderr := &tail{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the PDS launcher: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Closing stdin is the launcher's signal to stop the PDS and the PLC and exit.
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Logf("the PDS launcher did not stop within 15 s of its stdin closing; killed it")
		}
	})

	var first []byte
	select {
	case first = <-ready.done:
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("the PDS launcher exited before it was ready (%v); its stderr:\n%s", err, stderr)
	case <-time.After(startTimeout):
		t.Fatalf("the PDS launcher printed nothing within %s; its stderr:\n%s", startTimeout, stderr)
	}
	var p PDS
	if err := json.Unmarshal(first, &p); err != nil || p.URL == "" || p.DID == "" || p.Password == "" {
		t.Fatalf("the PDS launcher's first line is not the expected JSON (%v): %q; its stderr:\n%s", err, first, stderr)
	}
	return &p
}

// locate finds Node 22 (scripts/bluesky-pds/node/bin/node, else node on PATH) and the
// launcher's directory with its installed packages.
func locate() (node, dir string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(root, "scripts", "bluesky-pds")
	node = filepath.Join(dir, "node", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			return "", "", errors.New("no Node: neither scripts/bluesky-pds/node/bin/node nor node on PATH")
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if major < 22 {
		return "", "", fmt.Errorf("%s is Node %s", node, version)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@atproto", "dev-env", "package.json")); err != nil {
		return "", "", errors.New("@atproto/dev-env is not installed in scripts/bluesky-pds/node_modules")
	}
	return node, dir, nil
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// firstLine sends the first line written to it on done and discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	done chan []byte
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.sent = true
		w.done <- w.buf[:i]
	} else if len(w.buf) > 64<<10 {
		w.sent = true
		w.done <- w.buf
	}
	return len(p), nil
}

// tail keeps the last max bytes written to it: the launcher's stderr, for failure messages.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
