package bluesky

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
)

// Settings are an account's Bluesky settings, the JSON of platform.Account.Settings. Unknown
// fields are refused; a field left out takes its default. The app password is not among them:
// it comes from the account's credential reference.
type Settings struct {
	// PDS is the base URL of the account's PDS (or of an entryway that proxies to it), e.g.
	// "https://bsky.social". https, or http for a loopback host only (a development PDS): the
	// app password and the session tokens travel in it. No user information, query or fragment.
	// Required.
	PDS string `json:"pds"`
	// Identifier is the account's DID (preferred: it never changes) or handle. It logs in
	// (createSession), and it is the "repo" of every createRecord, so it is part of the
	// prepared bytes. Required.
	Identifier string `json:"identifier"`
	// ReconcileDelay is how long after a send's deadline the lookup is meaningful: a positive
	// Go duration. Default "10s".
	ReconcileDelay string `json:"reconcile_delay,omitempty"`
	// ContractVersion names the API contract; an account pinned to another one is refused at
	// authorization. Default "bluesky/v1".
	ContractVersion string `json:"contract_version,omitempty"`
	// MediaHosts are the hosts a post's images may be fetched from: a host name
	// ("media.example.org"), "*." and a name for any of its subdomains ("*.cdn.example.org",
	// not the name itself), or an address literal ("192.0.2.7", "2001:db8::7"). The URL's port
	// is not restricted. Default none: an intent with images is refused (parked), because the
	// URLs are the producer's and the dispatcher fetches them from inside the operator's
	// network; only the operator can say which hosts serve the account's media.
	MediaHosts []string `json:"media_hosts,omitempty"`
	// MediaPrivateNetworks are the prefixes ("127.0.0.1/32", "10.20.0.0/16") of the non-public
	// addresses (loopback, link-local, private and other special-purpose ranges) an image may be
	// fetched from, a host of MediaHosts having resolved to one. Default none: only public
	// addresses.
	MediaPrivateNetworks []string `json:"media_private_networks,omitempty"`
	// MediaCAFile is a PEM file of the certificates trusted for the media hosts' https, instead
	// of the system's roots (a private CA). Read when the adapter opens.
	MediaCAFile string `json:"media_ca_file,omitempty"`
}

const (
	defaultReconcileDelay  = 10 * time.Second
	defaultContractVersion = "bluesky/v1"
)

// config is a validated Settings with its defaults applied.
type config struct {
	pds            string // scheme://host[:port][/path], without a trailing slash
	identifier     string
	reconcileDelay time.Duration
	contract       string
	media          mediaPolicy
}

// parseSettings decodes and validates raw.
func parseSettings(raw json.RawMessage) (config, error) {
	var s Settings
	if len(bytes.TrimSpace(raw)) == 0 {
		return config{}, invalid("pds and identifier are required")
	}
	// encoding/json keeps the last of two equal keys; the canonical parser refuses them.
	if _, err := identity.CanonicalObject(raw); err != nil {
		return config{}, invalid("not a JSON object without duplicate keys: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return config{}, invalid("%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return config{}, invalid("trailing data after the settings object")
	}
	return s.validate()
}

func (s Settings) validate() (config, error) {
	var c config
	var err error
	if s.PDS == "" {
		return c, invalid("pds is required")
	}
	if c.pds, err = checkPDS(s.PDS); err != nil {
		return c, err
	}
	switch {
	case s.Identifier == "":
		return c, invalid("identifier is required (the account's DID or handle)")
	case !validDID(s.Identifier) && !validHandle(s.Identifier):
		return c, invalid("identifier %q is neither a DID nor a handle", s.Identifier)
	}
	c.identifier = s.Identifier
	c.reconcileDelay = defaultReconcileDelay
	if s.ReconcileDelay != "" {
		d, err := time.ParseDuration(s.ReconcileDelay)
		if err != nil {
			return c, invalid("reconcile_delay: %v", err)
		}
		if d <= 0 {
			return c, invalid("reconcile_delay %s: must be positive (requests still in flight must land before the lookup)", s.ReconcileDelay)
		}
		c.reconcileDelay = d
	}
	c.contract = defaultContractVersion
	if s.ContractVersion != "" {
		c.contract = s.ContractVersion
	}
	c.media, err = s.mediaPolicy()
	return c, err
}

// mediaPolicy validates the media settings.
func (s Settings) mediaPolicy() (mediaPolicy, error) {
	var p mediaPolicy
	for _, h := range s.MediaHosts {
		name, wild := strings.CutPrefix(h, "*.")
		_, addrErr := netip.ParseAddr(h)
		switch {
		case h != normalHost(h):
			return p, invalid("media_hosts: %q: lower case, without a trailing dot", h)
		case addrErr == nil:
		case !validHostName(name):
			return p, invalid("media_hosts: %q: a host name, \"*.\" and a host name, or an address (no scheme, port or path)", h)
		case wild && !strings.Contains(name, "."):
			return p, invalid("media_hosts: %q: a wildcard for a name of one label would allow a whole top-level domain", h)
		}
		p.hosts = append(p.hosts, h)
	}
	for _, n := range s.MediaPrivateNetworks {
		prefix, err := netip.ParsePrefix(n)
		if err != nil {
			return p, invalid("media_private_networks: %q: %v", n, err)
		}
		p.networks = append(p.networks, prefix.Masked())
	}
	if s.MediaCAFile != "" {
		pem, err := os.ReadFile(s.MediaCAFile)
		if err != nil {
			return p, invalid("media_ca_file: %v", err)
		}
		p.roots = x509.NewCertPool()
		if !p.roots.AppendCertsFromPEM(pem) {
			return p, invalid("media_ca_file %s holds no PEM certificate", s.MediaCAFile)
		}
	}
	return p, nil
}

// hostNameRE is a DNS host name: labels of letters, digits and inner hyphens.
var hostNameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func validHostName(s string) bool { return len(s) <= 253 && hostNameRE.MatchString(s) }

// checkPDS validates the PDS base URL and returns it without a trailing slash.
func checkPDS(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", invalid("pds: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid("pds %q: want an https URL", raw)
	case u.Host == "":
		return "", invalid("pds %q: no host", raw)
	case u.User != nil:
		return "", invalid("pds: user information in the URL is not allowed (the app password comes from the credential reference)")
	case u.RawQuery != "" || u.ForceQuery:
		return "", invalid("pds %q: a query is not allowed", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", invalid("pds %q: a fragment is not allowed", raw)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "", invalid("pds %q: http is allowed only for a loopback host; the app password and tokens would travel in clear", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var (
	// The DID syntax of the AT Protocol (atproto.com/specs/did).
	didRE = regexp.MustCompile(`^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$`)
	// The handle syntax (atproto.com/specs/handle).
	handleRE = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)
)

func validDID(s string) bool    { return len(s) <= 2048 && didRE.MatchString(s) }
func validHandle(s string) bool { return len(s) <= 253 && handleRE.MatchString(s) }
