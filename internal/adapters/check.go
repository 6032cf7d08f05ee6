package adapters

import (
	"errors"
	"fmt"
	"os"

	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// CredentialCheck says how far a check could look at an account's credential.
type CredentialCheck string

const (
	// CredentialNone: the account has no credential reference.
	CredentialNone CredentialCheck = "none"
	// CredentialRead: the reference was read where the check ran, and the adapter took the
	// credential it names.
	CredentialRead CredentialCheck = "read"
	// CredentialUnread: the reference is well formed but names nothing readable where the check
	// ran (no such variable, no such file, not readable). The roles that open the account run
	// elsewhere, with their own environment; they must be able to read it.
	CredentialUnread CredentialCheck = "unread"
)

// Check is what opening an account's adapter, sending nothing, told about the account.
type Check struct {
	Credential CredentialCheck
	// Unread says, for CredentialUnread, why the reference could not be read: it names the
	// reference, never a value.
	Unread string
}

// credentialStandIn is what the adapter is given for a credential that cannot be read where
// the check runs, so that it checks everything else: never sent, since nothing is.
const credentialStandIn = "atmost-check-stand-in"

// CheckAccount opens a's adapter from r as a role would, and sends nothing. It refuses what a
// role opening the account would refuse, with the adapter's own message: an unknown platform
// (naming those there are), settings the adapter refuses (an unknown key, a required one
// missing, a value out of range), a malformed credential reference, and a credential the
// reference names that the adapter refuses (empty, a control character). A reference that
// cannot be read here is not refused (see CredentialUnread): the adapter then gets a stand-in,
// so its settings are still checked. lookupEnv reads the environment of the command that
// checks (os.LookupEnv in a role). The credential's value goes to the adapter only, which is
// dropped; no message holds it.
func CheckAccount(r platform.Registry, a ledger.Account, lookupEnv func(string) (string, bool)) (Check, error) {
	_, check, err := openChecked(r, a, lookupEnv)
	return check, err
}

// CapabilitiesOf opens a's adapter as CheckAccount does, sending nothing, and returns what the
// adapter declares (its reconcile delay, whether its lookup proves not-sent), or why it does
// not open.
func CapabilitiesOf(r platform.Registry, a ledger.Account, lookupEnv func(string) (string, bool)) (platform.Capabilities, error) {
	ad, _, err := openChecked(r, a, lookupEnv)
	if err != nil {
		return platform.Capabilities{}, err
	}
	return ad.Capabilities(), nil
}

func openChecked(r platform.Registry, a ledger.Account, lookupEnv func(string) (string, bool)) (platform.Adapter, Check, error) {
	check := Check{Credential: CredentialNone}
	kind, name, err := platform.ParseCredentialRef(a.CredentialRef)
	if err != nil {
		return nil, check, fmt.Errorf("account %q: %w", a.ID, err)
	}
	var secret string
	switch kind {
	case platform.CredentialEnv:
		v, ok := lookupEnv(name)
		if ok {
			secret, check.Credential = v, CredentialRead
		} else {
			check.Credential, check.Unread = CredentialUnread, fmt.Sprintf("environment variable %s is not set here", name)
		}
	case platform.CredentialFile:
		// The file is read as the roles read it (its content, white space trimmed).
		v, err := platform.ResolveCredential(a.CredentialRef)
		if err == nil {
			secret, check.Credential = v, CredentialRead
		} else {
			var pathErr *os.PathError
			if errors.As(err, &pathErr) {
				err = pathErr.Err // the path is named already
			}
			check.Credential, check.Unread = CredentialUnread, fmt.Sprintf("file %s cannot be read here: %v", name, err)
		}
	}
	acct := platform.Account{ID: a.ID, Platform: a.Platform, Settings: a.Settings, CredentialRef: a.CredentialRef,
		CredentialVersion: a.CredentialVersion}
	if kind != "" {
		acct.Credential = func() (string, error) {
			if check.Credential == CredentialUnread {
				return credentialStandIn, nil
			}
			return secret, nil
		}
	}
	ad, err := r.Open(acct)
	if err != nil {
		return nil, check, err
	}
	return ad, check, nil
}
