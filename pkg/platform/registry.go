package platform

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Opener opens an adapter for one account, validating the account's settings.
type Opener func(a Account) (Adapter, error)

// Registry maps platform names to their openers.
type Registry map[string]Opener

// ErrUnknownPlatform: no adapter is registered under the account's platform name.
var ErrUnknownPlatform = errors.New("platform: no adapter for this platform")

// Names are the platforms r opens, in name order.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens the adapter for a.
func (r Registry) Open(a Account) (Adapter, error) {
	open, ok := r[a.Platform]
	if !ok {
		return nil, fmt.Errorf("account %q: platform %q: %w (have %s)", a.ID, a.Platform, ErrUnknownPlatform, strings.Join(r.Names(), ", "))
	}
	ad, err := open(a)
	if err != nil {
		return nil, fmt.Errorf("account %q: platform %q: %w", a.ID, a.Platform, err)
	}
	return ad, nil
}

// ErrNoCredential: the credential reference names nothing that exists.
var ErrNoCredential = errors.New("platform: credential not found")

// ErrCredentialRef: a credential reference is not of a form ResolveCredential reads.
var ErrCredentialRef = errors.New("platform: malformed credential reference")

// The kinds of credential reference ParseCredentialRef knows.
const (
	CredentialEnv  = "env"  // env:NAME, an environment variable of the process that opens the adapter
	CredentialFile = "file" // file:PATH, a file's content, surrounding white space trimmed
)

// ParseCredentialRef checks a credential reference's form and splits it into its kind
// (CredentialEnv or CredentialFile) and the variable's name or the file's path. The empty
// reference is no credential: kind "". A name holding "=" or NUL and a path holding NUL can
// never be read, so they are malformed too (ErrCredentialRef).
func ParseCredentialRef(ref string) (kind, name string, err error) {
	if ref == "" {
		return "", "", nil
	}
	kind, name, _ = strings.Cut(ref, ":")
	switch {
	case kind == CredentialEnv && name != "" && !strings.ContainsAny(name, "=\x00"):
		return kind, name, nil
	case kind == CredentialFile && name != "" && !strings.Contains(name, "\x00"):
		return kind, name, nil
	}
	return "", "", fmt.Errorf("%w %q: must be env:NAME or file:/path", ErrCredentialRef, ref)
}

// ResolveCredential reads the credential a reference names: "env:NAME" (an environment
// variable), "file:/path" (a file's content, surrounding white space trimmed) or "" (none).
// The value is never logged or stored.
func ResolveCredential(ref string) (string, error) {
	kind, name, err := ParseCredentialRef(ref)
	switch {
	case err != nil:
		return "", err
	case kind == CredentialEnv:
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set", ErrNoCredential, name)
		}
		return v, nil
	case kind == CredentialFile:
		b, err := os.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoCredential, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// Secret reads the account's credential: through a.Credential when it is set, else
// ResolveCredential(a.CredentialRef). Adapters read it this way, once, when they are opened;
// the value is never logged or stored.
func (a Account) Secret() (string, error) {
	if a.Credential != nil {
		return a.Credential()
	}
	return ResolveCredential(a.CredentialRef)
}
