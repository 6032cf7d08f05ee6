package ingest

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The role's --linger and ATMOST_INGEST_LINGER say 0 for none, where Config's zero Linger is
// its default: the Ingester the role builds must linger as the command line says.
func TestTheRolesLingerReachesTheIngester(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
	}{
		{name: "default", want: DefaultLinger},
		{name: "--linger 0", args: []string{"--linger", "0"}, want: 0},
		{name: "ATMOST_INGEST_LINGER=0", env: map[string]string{"ATMOST_INGEST_LINGER": "0"}, want: 0},
		{name: "--linger 3ms", args: []string{"--linger", "3ms"}, want: 3 * time.Millisecond},
		{name: "the flag over the environment", args: []string{"--linger", "0"}, env: map[string]string{"ATMOST_INGEST_LINGER": "7ms"}, want: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			cfg, code := parseRoleConfig(c.args, getenv, io.Discard)
			require.Negative(t, code, "the command line is accepted")
			require.Equal(t, c.want, cfg.ingesterConfig(nil, nil).withDefaults().Linger)
		})
	}
}
