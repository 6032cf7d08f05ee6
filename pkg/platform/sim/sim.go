// Package sim is the platform adapter for atmost's platform simulator (internal/tools/platformsim,
// the platformsim binary): the adapter every end-to-end test and the demo deliver through.
//
// Every send is one POST through a single shared transport.Client (no automatic retry of any
// kind) and is classified by transport.Classify with transport.DefaultDefinitive(), so the
// adapter reports NotSent only for a connection that was never obtained or a definitive
// refusal (400, 401, 403, 413, 422, 429); everything else that is not a 2xx naming the created
// object is Unknown. Lookup proves not-sent only when the account declares the simulator's
// idempotency-status endpoint (status_lookup); the listing it falls back to otherwise proves
// nothing by being empty.
package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Name is the platform name accounts served by this adapter carry (platform.Account.Platform).
const Name = "sim"

// ErrInvalidSettings: the account's settings are not a JSON object of the known fields, or a
// field is out of range. The error text names the field.
var ErrInvalidSettings = errors.New("sim: invalid account settings")

// ErrWrongAccount: a request names another account than the one the adapter was opened for.
var ErrWrongAccount = errors.New("sim: request for another account")

const (
	defaultReconcileDelay  = 2 * time.Second
	defaultContractVersion = "sim/v1"
)

// settings is the JSON of platform.Account.Settings for this adapter.
type settings struct {
	// URL is the simulator's base URL, http or https (required).
	URL string `json:"url"`
	// StatusLookup declares the simulator's GET /v1/idempotency/{key} (run it with
	// --status-lookup): then a lookup that answers not_seen proves not-sent.
	StatusLookup bool `json:"status_lookup"`
	// ReconcileDelay is a positive Go duration; default 2s.
	ReconcileDelay string `json:"reconcile_delay"`
	// ContractVersion defaults to "sim/v1".
	ContractVersion string `json:"contract_version"`
}

// adapter is the simulator opened for one account.
type adapter struct {
	account string
	base    string // scheme://host[:port][/path], without a trailing slash
	caps    platform.Capabilities
	client  *transport.Client
}

// Open opens the simulator adapter for account a. a.Settings is a JSON object:
//
//	{"url": "http://127.0.0.1:9300", "status_lookup": false, "reconcile_delay": "2s",
//	 "contract_version": "sim/v1"}
//
// url is required (http or https, no query or fragment); the others take the defaults shown.
// Unknown fields, a malformed field, or an empty account id fail with ErrInvalidSettings.
// The adapter holds one transport.Client for its whole life and no credential: the simulator
// asks for none.
func Open(a platform.Account) (platform.Adapter, error) {
	if a.ID == "" {
		return nil, fmt.Errorf("%w: the account has no id", ErrInvalidSettings)
	}
	s, err := parseSettings(a.Settings)
	if err != nil {
		return nil, err
	}
	delay := defaultReconcileDelay
	if s.ReconcileDelay != "" {
		delay, err = time.ParseDuration(s.ReconcileDelay)
		if err != nil || delay <= 0 {
			// Zero would let a lookup ask before a request still inside the simulator landed.
			return nil, fmt.Errorf("%w: reconcile_delay %q: must be a positive duration such as 2s", ErrInvalidSettings, s.ReconcileDelay)
		}
	}
	version := s.ContractVersion
	if version == "" {
		version = defaultContractVersion
	}
	base, err := baseURL(s.URL)
	if err != nil {
		return nil, err
	}
	return &adapter{
		account: a.ID,
		base:    base,
		caps: platform.Capabilities{
			StatusLookup:        s.StatusLookup,
			DefinitiveStatuses:  transport.DefaultDefinitive(),
			ContractVersion:     version,
			ReconcileDelay:      delay,
			UnavailableStatuses: platform.DeclaredStatuses(platform.DefaultUnavailableStatuses(), transport.DefaultDefinitive()),
			AuthStatuses:        platform.DeclaredStatuses(platform.DefaultAuthStatuses(), transport.DefaultDefinitive()),
		},
		client: transport.New(transport.Config{}),
	}, nil
}

func parseSettings(raw json.RawMessage) (settings, error) {
	var s settings
	if len(bytes.TrimSpace(raw)) == 0 {
		return s, fmt.Errorf("%w: missing; url is required", ErrInvalidSettings)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalidSettings, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return s, fmt.Errorf("%w: data after the settings object", ErrInvalidSettings)
	}
	return s, nil
}

func baseURL(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("%w: url is required", ErrInvalidSettings)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: url %q: %v", ErrInvalidSettings, raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: url %q: the scheme must be http or https", ErrInvalidSettings, raw)
	case u.Host == "":
		return "", fmt.Errorf("%w: url %q: no host", ErrInvalidSettings, raw)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%w: url %q: no user, query or fragment allowed", ErrInvalidSettings, raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Capabilities returns what the account's settings declare; DefinitiveStatuses are
// transport.DefaultDefinitive().
func (a *adapter) Capabilities() platform.Capabilities {
	c := a.caps
	c.DefinitiveStatuses = slices.Clone(a.caps.DefinitiveStatuses)
	return c
}
