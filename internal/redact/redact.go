// Package redact hides the secrets a server URL may carry before atmost prints or logs it: a
// database or NATS URL comes from a flag or the environment and often holds a password, and
// output and logs are read, kept and pasted by people who must not learn it.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "xxxxx"

var (
	// userinfo is the part of an authority before its last @: nats.go takes a comma-separated
	// list of URLs and libpq a list of hosts, so it is found in the text rather than by
	// net/url, which refuses both.
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)@`)
	// secretParam is a password or token given as a query parameter or a key=value pair of a
	// PostgreSQL connection string, its value quoted or not.
	secretParam = regexp.MustCompile(`(?i)((?:^|[\s?&;])(?:password|sslpassword|token)\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&#]*)`)
)

// tokenSchemes are the schemes whose userinfo without a password is a token (nats://TOKEN@host),
// not a user name.
var tokenSchemes = []string{"nats", "tls", "ws", "wss"}

// URL returns raw with every password and token replaced by Mask: the password of each
// user:password@, the whole userinfo of a NATS URL without a password (a token), and the
// password, sslpassword and token parameters. Everything else, the user name included, stays as
// it was, so the printed URL still says which server and which database. It never fails: text
// that is no URL at all comes back with its key=value secrets masked.
func URL(raw string) string {
	out := userinfo.ReplaceAllStringFunc(raw, func(m string) string {
		sub := userinfo.FindStringSubmatch(m)
		scheme, info := sub[1], sub[2]
		if user, _, ok := strings.Cut(info, ":"); ok {
			return scheme + "://" + user + ":" + Mask + "@"
		}
		for _, s := range tokenSchemes {
			if strings.EqualFold(scheme, s) && info != "" {
				return scheme + "://" + Mask + "@"
			}
		}
		return m
	})
	return secretParam.ReplaceAllString(out, "${1}"+Mask)
}
