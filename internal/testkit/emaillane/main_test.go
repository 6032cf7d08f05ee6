package emaillane_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/emaillane"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/email"
)

// lane is the lane's servers, started by the first test that asks. Not in make test-short's
// lane: a run sends hundreds of messages.
func lane(t *testing.T) *emaillane.Lane {
	t.Helper()
	dbtest.SkipInShortLane(t, "it sends mail through Postfix and reads it from Dovecot")
	return emaillane.Shared(t)
}

// account is this run's account: the delivery key derives from it, so a run's messages never
// meet those an earlier run left in the mailboxes.
var account = fmt.Sprintf("acct-email-%d", time.Now().UnixNano())

var credentials atomic.Int64

// accountFor is the bot's account through submission and imap (the servers, or a proxy's
// ports), trusting the lane's certificate and extra (a proxy's), with the password behind an
// env: credential reference as an operator's would be.
func accountFor(t testing.TB, l *emaillane.Lane, submission, imap string, extra []byte, password string) platform.Account {
	t.Helper()
	ca, err := os.ReadFile(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, append(ca, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	// os.Setenv, not t.Setenv: tests may run in parallel, each with its own variable.
	name := fmt.Sprintf("ATMOST_TEST_EMAIL_PASSWORD_%d_%d", os.Getpid(), credentials.Add(1))
	if err := os.Setenv(name, password); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Unsetenv(name) })
	settings, err := json.Marshal(map[string]any{
		"submission": submission, "imap": imap, "ca_file": bundle,
		"username": l.Bot, "from": l.Bot, "to": []string{l.Reader}, "subject": "atmost's email lane",
		"mailbox": l.ArchiveName, "reconcile_delay": "2s",
	})
	if err != nil {
		t.Fatal(err)
	}
	return platform.Account{ID: account, Platform: email.Name, Settings: settings, CredentialRef: "env:" + name, CredentialVersion: 1}
}

func open(t testing.TB, a platform.Account) platform.Adapter {
	t.Helper()
	ad, err := email.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

// withRecipient replaces the settings' recipients with to.
func withRecipient(t testing.TB, settings []byte, to string) []byte {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(settings, &s); err != nil {
		t.Fatal(err)
	}
	s["to"] = []string{to}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
