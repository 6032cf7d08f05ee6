package console

import "time"

// SetClock makes s read the time from now: sessions' idle and absolute ends, and the
// throttle of wrong tokens.
func SetClock(s *Server, now func() time.Time) { s.now = now }

// APIRoutes are the patterns of the API's routes.
func APIRoutes() []string {
	out := make([]string, len(apiRoutes))
	for i, r := range apiRoutes {
		out[i] = r.pattern
	}
	return out
}
