package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
)

// Settings are an account's Matrix settings, the JSON of platform.Account.Settings. Unknown
// fields are refused; a field left out takes its default. The access token is not among them:
// it comes from the account's credential reference.
type Settings struct {
	// Homeserver is the base URL of the client-server API, e.g. "https://matrix.example".
	// https, or http for a loopback host only (the access token travels in it). No user
	// information, query or fragment. Required.
	Homeserver string `json:"homeserver"`
	// RoomID is the room the account posts to: a room id ("!opaque:server"), not an alias,
	// because Prepare makes no network call and the room is part of the prepared URL. The
	// account must have joined it. Required.
	RoomID string `json:"room_id"`
	// UserID is the account's Matrix user ("@localpart:server"): the sender a read-back and the
	// lookup require. Required.
	UserID string `json:"user_id"`
	// MsgType is the message's msgtype: "m.text" (default) or "m.notice" (what bots send).
	MsgType string `json:"msgtype,omitempty"`
	// LookupEvents is how many of the room's most recent events the lookup reads, at most
	// (1 to 100000). Default 1000.
	LookupEvents int `json:"lookup_events,omitempty"`
	// ReconcileDelay is how long after a send's deadline the lookup is meaningful: a positive
	// Go duration. Default "10s".
	ReconcileDelay string `json:"reconcile_delay,omitempty"`
	// ContractVersion names the API contract; an account pinned to another one is refused at
	// authorization. Default "matrix/v3".
	ContractVersion string `json:"contract_version,omitempty"`
}

const (
	defaultLookupEvents    = 1000
	maxLookupEvents        = 100000
	defaultReconcileDelay  = 10 * time.Second
	defaultContractVersion = "matrix/v3"
)

// config is a validated Settings with its defaults applied.
type config struct {
	homeserver     string // scheme://host[:port][/path], without a trailing slash
	roomID         string
	userID         string
	msgType        string
	lookupEvents   int
	reconcileDelay time.Duration
	contract       string
}

// parseSettings decodes and validates raw.
func parseSettings(raw json.RawMessage) (config, error) {
	var s Settings
	if len(bytes.TrimSpace(raw)) == 0 {
		return config{}, invalid("homeserver, room_id and user_id are required")
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

var (
	// A room id: "!" then an opaque local part, ":" and the server name (spec.matrix.org,
	// Appendices, Room IDs); no character that would change the URL's path.
	roomIDRE = regexp.MustCompile(`^![^:/?#\s]+:[A-Za-z0-9.\-\[\]:]+$`)
	// A user id: "@" then the historical local part characters, ":" and the server name.
	userIDRE = regexp.MustCompile(`^@[!-9;-~]+:[A-Za-z0-9.\-\[\]:]+$`)
)

func (s Settings) validate() (config, error) {
	var c config
	var err error
	if s.Homeserver == "" {
		return c, invalid("homeserver is required")
	}
	if c.homeserver, err = checkHomeserver(s.Homeserver); err != nil {
		return c, err
	}
	switch {
	case s.RoomID == "":
		return c, invalid("room_id is required (the room's id, !opaque:server)")
	case len(s.RoomID) > 255 || !roomIDRE.MatchString(s.RoomID):
		return c, invalid("room_id %q is not a room id (!opaque:server; an alias #name:server is not accepted)", s.RoomID)
	case s.UserID == "":
		return c, invalid("user_id is required (the account's user, @localpart:server)")
	case len(s.UserID) > 255 || !userIDRE.MatchString(s.UserID):
		return c, invalid("user_id %q is not a user id (@localpart:server)", s.UserID)
	}
	c.roomID, c.userID = s.RoomID, s.UserID
	switch s.MsgType {
	case "", "m.text":
		c.msgType = "m.text"
	case "m.notice":
		c.msgType = "m.notice"
	default:
		return c, invalid("msgtype %q: want m.text or m.notice", s.MsgType)
	}
	c.lookupEvents = defaultLookupEvents
	if s.LookupEvents != 0 {
		if s.LookupEvents < 1 || s.LookupEvents > maxLookupEvents {
			return c, invalid("lookup_events %d: want 1 to %d", s.LookupEvents, maxLookupEvents)
		}
		c.lookupEvents = s.LookupEvents
	}
	c.reconcileDelay = defaultReconcileDelay
	if s.ReconcileDelay != "" {
		d, err := time.ParseDuration(s.ReconcileDelay)
		if err != nil {
			return c, invalid("reconcile_delay: %v", err)
		}
		if d <= 0 {
			return c, invalid("reconcile_delay %s: must be positive (the room's history shows a new event after a while)", s.ReconcileDelay)
		}
		c.reconcileDelay = d
	}
	c.contract = defaultContractVersion
	if s.ContractVersion != "" {
		c.contract = s.ContractVersion
	}
	return c, nil
}

// checkHomeserver validates the homeserver's base URL and returns it without a trailing slash.
func checkHomeserver(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", invalid("homeserver: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid("homeserver %q: want an https URL", raw)
	case u.Host == "":
		return "", invalid("homeserver %q: no host", raw)
	case u.User != nil:
		return "", invalid("homeserver: user information in the URL is not allowed (the access token comes from the credential reference)")
	case u.RawQuery != "" || u.ForceQuery:
		return "", invalid("homeserver %q: a query is not allowed", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", invalid("homeserver %q: a fragment is not allowed", raw)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "", invalid("homeserver %q: http is allowed only for a loopback host; the access token would travel in clear", raw)
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
