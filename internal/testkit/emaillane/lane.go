package emaillane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns the lane's skip into a failure: where
// it is "1" (make test-email), or where CI is "true", missing servers fail the test.
const RequireEnv = "ATMOST_EMAIL_LANE"

// ConfigFile is where scripts/email/install writes the lane's configuration.
const ConfigFile = "/etc/atmost-email/lane.json"

// SkipMessage is what the lane says where it cannot run.
const SkipMessage = "the email lane needs Postfix and Dovecot configured by scripts/email/install (as root): run make test-email"

// Lane is the configuration scripts/email/install wrote: the servers' addresses, the CA that
// signs their certificate, and the two users.
type Lane struct {
	// Submission and IMAP are the servers' loopback addresses (host:port).
	Submission string `json:"submission"`
	IMAP       string `json:"imap"`
	// CAFile is the servers' self-signed certificate.
	CAFile string `json:"ca_file"`
	// Bot is the account atmost sends as; every message it submits is copied into its mailbox
	// Archive.
	Bot         string `json:"bot"`
	BotPassword string `json:"bot_password"`
	// Reader is the person the messages go to.
	Reader         string `json:"reader"`
	ReaderPassword string `json:"reader_password"`
	// Archive is the bot's mailbox that holds the copies.
	ArchiveName string `json:"archive"`
}

// Required reports whether missing servers are a failure here rather than a skip.
func Required() bool { return os.Getenv(RequireEnv) == "1" || os.Getenv("CI") == "true" }

var (
	sharedOnce sync.Once
	shared     *Lane
	sharedErr  error
)

var errNotInstalled = errors.New("the email lane is not installed")

// Shared reads the lane's configuration and starts (or reloads) both servers once per test
// binary. Servers that are not configured skip t (fail it where Required); servers that do
// not start fail t.
func Shared(t testing.TB) *Lane {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if errors.Is(sharedErr, errNotInstalled) {
		if Required() {
			t.Fatalf("%s: %v", SkipMessage, sharedErr)
		}
		t.Skipf("%s (%v)", SkipMessage, sharedErr)
	}
	if sharedErr != nil {
		t.Fatalf("starting Postfix and Dovecot: %v", sharedErr)
	}
	return shared
}

func start() (*Lane, error) {
	b, err := os.ReadFile(ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotInstalled, err)
	}
	var l Lane
	if err := json.Unmarshal(b, &l); err != nil || l.Submission == "" || l.IMAP == "" || l.BotPassword == "" || l.ArchiveName == "" {
		return nil, fmt.Errorf("%s is not the lane's configuration (%v): run scripts/email/install again", ConfigFile, err)
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "email", "start"))
	// A daemon the script starts that kept its output would keep the pipe open as long as it
	// runs: the script's own exit is the end.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("scripts/email/start: %v\n%s", err, out)
	}
	return &l, nil
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
