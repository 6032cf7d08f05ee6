package platform

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// Opener opens an adapter for one account, validating the account's settings.
type Opener func(a Account) (Adapter, error)

// Registry maps platform names to their openers.
type Registry map[string]Opener

// ErrUnknownPlatform: no adapter is registered under the account's platform name.
var ErrUnknownPlatform = errors.New("platform: no adapter for this platform")

// registered is the process's registry: every adapter atmost's roles and commands can open.
var (
	registeredMu sync.RWMutex
	registered   = Registry{}
)

// Register makes an adapter available to atmost's roles and commands in this process, under
// the platform name an account's configuration gives (`atmost accounts add --platform name`).
// atmost's own adapters are registered under their names (bluesky, email, matrix, sim, webhook) before
// a program's main runs; a program built on atmost registers its own, from an init function or
// main, before it runs atmost's command (package github.com/atmost/atmost/pkg/command). Register
// panics when name is empty or taken or open is nil, as database/sql.Register does: two adapters
// under one name would make an account's adapter depend on the order of registration.
func Register(name string, open Opener) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	switch {
	case name == "":
		panic("platform: Register with an empty name")
	case open == nil:
		panic(fmt.Sprintf("platform: Register %q with a nil Opener", name))
	case registered[name] != nil:
		panic(fmt.Sprintf("platform: Register called twice for %q", name))
	}
	registered[name] = open
}

// Registered returns a copy of the adapters Register made available, by platform name.
func Registered() Registry {
	registeredMu.RLock()
	defer registeredMu.RUnlock()
	out := make(Registry, len(registered))
	for n, o := range registered {
		out[n] = o
	}
	return out
}

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
