package bluesky

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/atmost/atmost/pkg/platform"
)

// ErrMediaRefused: an image's URL, or a redirect it answered with, or the address its host
// resolved to, is not one the account's settings allow the dispatcher to fetch from
// (media_hosts, media_private_networks). It wraps platform.ErrUnsendable: the dispatcher parks
// the intent (request_unsendable) before any attempt is begun; nothing is fetched from the
// refused place and nothing is sent.
var ErrMediaRefused = fmt.Errorf("bluesky: image URL refused: %w", platform.ErrUnsendable)

// MaxMediaRedirects is how many redirects an image's fetch follows, each one checked as the
// URL it came from.
const MaxMediaRedirects = 3

// mediaPolicy says where the dispatcher may fetch an account's images from. The image URLs are
// written by whoever publishes intents, while the dispatcher runs inside the operator's network
// and can reach what the producer cannot (a cloud's metadata service, loopback and private
// services): so the account names the hosts (media_hosts), and a host whose address is not
// public is reached only inside the networks it names (media_private_networks).
type mediaPolicy struct {
	hosts    []string       // lower case, without a trailing dot; "*.example.org" matches its subdomains
	networks []netip.Prefix // non-public addresses that may be fetched from
	roots    *x509.CertPool // nil: the system's roots
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMediaRefused, fmt.Sprintf(format, args...))
}

// checkURL is what an image's URL, and each redirect, must be: https, a host among
// media_hosts, and an address literal only when the address may be fetched from. It makes no
// network call; the address a host name resolves to is checked when the fetch dials it.
func (p mediaPolicy) checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return refused("url %q: %v", raw, err)
	case u.Scheme != "https":
		return refused("url %q: images are fetched over https only", raw)
	case u.Host == "" || u.User != nil:
		return refused("url %q: an https URL with a host and no user information", raw)
	}
	host := normalHost(u.Hostname())
	if !p.hostAllowed(host) {
		if len(p.hosts) == 0 {
			return refused("url %q: the account's media_hosts is empty, so no image is fetched", raw)
		}
		return refused("url %q: host %q is not among the account's media_hosts (%s)", raw, host, strings.Join(p.hosts, ", "))
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := p.checkAddr(addr); err != nil {
			return fmt.Errorf("url %q: %w", raw, err)
		}
	}
	return nil
}

func normalHost(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

func (p mediaPolicy) hostAllowed(host string) bool {
	for _, h := range p.hosts {
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suffix) {
				return true
			}
		} else if host == h {
			return true
		}
	}
	return false
}

// checkAddr refuses an address that is not public (loopback, link-local, private, or another
// special-purpose range) unless one of media_private_networks holds it.
func (p mediaPolicy) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	kind := nonPublic(a)
	if kind == "" {
		return nil
	}
	for _, n := range p.networks {
		if n.Contains(a) {
			return nil
		}
	}
	return refused("address %s is %s, and none of the account's media_private_networks holds it", a, kind)
}

// specialPurpose are the ranges of the IANA special-purpose registries that are not globally
// reachable, beyond what netip.Addr's predicates name (or that hold another address inside:
// NAT64, 6to4, Teredo, IPv4-compatible).
var specialPurpose = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
		"::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32",
		"2002::/16", "fec0::/10",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// nonPublic says what kind of non-public address a is, "" for a public one.
func nonPublic(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "no address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	}
	for _, p := range specialPurpose {
		if p.Contains(a) {
			return "a special-purpose address (" + p.String() + ")"
		}
	}
	return ""
}

// client is the HTTP client of the images' fetches: no proxy from the environment (the
// addresses checked are the ones connected to), every connection's address checked as it is
// dialed (after DNS, so a name that resolves to a refused address is refused, however often it
// changes), and every redirect checked as the first URL, at most MaxMediaRedirects of them.
func (p mediaPolicy) client() *http.Client {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return refused("dialing %s: not an address and port: %v", address, err)
			}
			return p.checkAddr(ap.Addr())
		},
	}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxMediaRedirects {
				return refused("more than %d redirects from %s", MaxMediaRedirects, via[0].URL)
			}
			if err := p.checkURL(req.URL.String()); err != nil {
				return fmt.Errorf("the redirect from %s: %w", via[len(via)-1].URL, err)
			}
			return nil
		},
	}
}
