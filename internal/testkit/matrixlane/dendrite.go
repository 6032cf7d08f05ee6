package matrixlane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns the lane's skip into a failure: where
// it is "1" (make test-matrix), or where CI is "true", a missing Dendrite fails the test.
const RequireEnv = "ATMOST_MATRIX_LANE"

// Version is the Dendrite release the lane runs (scripts/dendrite/install's default).
const Version = "v0.13.8"

// SkipMessage is what the lane says where it cannot run.
const SkipMessage = "the Matrix lane needs Dendrite " + Version + ": run make test-matrix (scripts/dendrite/install builds it from the Go module proxy)"

// startTimeout bounds the launcher: keys, configuration, two accounts and a room on SQLite.
const startTimeout = 2 * time.Minute

// Server is a running Dendrite with the launcher's two accounts.
type Server struct {
	// URL is the client-server API's base URL on loopback, e.g. http://127.0.0.1:41234.
	URL string `json:"url"`
	// UserID and AccessToken are the bot's: the account atmost posts as.
	UserID      string `json:"user_id"`
	AccessToken string `json:"access_token"`
	// RoomID is the launcher's room (both accounts joined).
	RoomID string `json:"room_id"`
	// ObserverID and ObserverToken are a second account, joined to every room the lane makes,
	// that reads the rooms as a person would.
	ObserverID    string `json:"observer_id"`
	ObserverToken string `json:"observer_token"`

	stop func()
}

// Stop stops Dendrite and waits for the launcher to exit.
func (s *Server) Stop() { s.stop() }

// Required reports whether a missing Dendrite is a failure here rather than a skip.
func Required() bool { return os.Getenv(RequireEnv) == "1" || os.Getenv("CI") == "true" }

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the package's one Dendrite, started by the first caller, in a directory of its
// own under dir; StopShared stops it (TestMain calls it after the tests). A Dendrite that is
// not installed skips t (fails it where Required); one that does not start fails t.
func Shared(t testing.TB, dir string) *Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start(dir) })
	if errors.Is(sharedErr, errNotInstalled) {
		if Required() {
			t.Fatalf("%s: %v", SkipMessage, sharedErr)
		}
		t.Skipf("%s (%v)", SkipMessage, sharedErr)
	}
	if sharedErr != nil {
		t.Fatalf("starting Dendrite: %v", sharedErr)
	}
	return shared
}

// StopShared stops the Dendrite Shared started, if any.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

var errNotInstalled = errors.New("dendrite is not installed")

// Bin is the directory scripts/dendrite/install puts Dendrite's commands in:
// $ATMOST_DENDRITE_HOME/bin, else the user's cache directory's atmost-tools/dendrite-VERSION/bin.
func Bin() (string, error) {
	if home := os.Getenv("ATMOST_DENDRITE_HOME"); home != "" {
		return filepath.Join(home, "bin"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "atmost-tools", "dendrite-"+Version, "bin"), nil
}

// Start runs scripts/dendrite/start with its state in dir on a free loopback port and returns
// the server once the launcher printed its line. errNotInstalled when Dendrite's commands are
// absent.
func Start(dir string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotInstalled, err)
	}
	for _, c := range []string{"dendrite", "generate-keys", "generate-config", "create-account"} {
		if _, err := os.Stat(filepath.Join(bin, c)); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotInstalled, err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "dendrite", "start"), dir, addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	ready := &firstLine{done: make(chan []byte, 1)}
	cmd.Stdout = ready
	stderr := &tail{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the Dendrite launcher: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		// Closing stdin is the launcher's signal to stop Dendrite and exit.
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	var first []byte
	select {
	case first = <-ready.done:
	case err := <-exited:
		return nil, fmt.Errorf("the Dendrite launcher exited before it was ready (%v); its stderr:\n%s", err, stderr)
	case <-time.After(startTimeout):
		stop()
		return nil, fmt.Errorf("the Dendrite launcher printed nothing within %s; its stderr:\n%s", startTimeout, stderr)
	}
	var s Server
	if err := json.Unmarshal(first, &s); err != nil || s.URL == "" || s.AccessToken == "" || s.RoomID == "" || s.ObserverToken == "" {
		stop()
		return nil, fmt.Errorf("the Dendrite launcher's first line is not the expected JSON (%v): %q; its stderr:\n%s", err, first, stderr)
	}
	s.stop = stop
	return &s, nil
}

// freePort is a loopback address nobody listened on a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
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
