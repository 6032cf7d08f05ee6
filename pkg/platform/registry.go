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

// Open opens the adapter for a.
func (r Registry) Open(a Account) (Adapter, error) {
	open, ok := r[a.Platform]
	if !ok {
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("account %q: platform %q: %w (have %s)", a.ID, a.Platform, ErrUnknownPlatform, strings.Join(names, ", "))
	}
	ad, err := open(a)
	if err != nil {
		return nil, fmt.Errorf("account %q: platform %q: %w", a.ID, a.Platform, err)
	}
	return ad, nil
}

// ErrNoCredential: the credential reference names nothing that exists.
var ErrNoCredential = errors.New("platform: credential not found")

// ResolveCredential reads the credential a reference names: "env:NAME" (an environment
// variable), "file:/path" (a file's content, surrounding white space trimmed) or "" (none).
// The value is never logged or stored.
func ResolveCredential(ref string) (string, error) {
	kind, rest, _ := strings.Cut(ref, ":")
	switch {
	case ref == "":
		return "", nil
	case kind == "env" && rest != "":
		v, ok := os.LookupEnv(rest)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set", ErrNoCredential, rest)
		}
		return v, nil
	case kind == "file" && rest != "":
		b, err := os.ReadFile(rest)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoCredential, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("credential reference %q: must be env:NAME or file:/path", ref)
}
