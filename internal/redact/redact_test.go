package redact_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/redact"
)

// Every password and token a database or NATS URL may carry is masked, and the rest (which
// server, which user, which database) stays readable.
func TestEverySecretOfAURLIsMasked(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"postgres://atmost:s3cret@db.example:5432/atmost?sslmode=disable":       "postgres://atmost:xxxxx@db.example:5432/atmost?sslmode=disable",
		"postgresql://atmost:p%40ss@db/atmost":                                  "postgresql://atmost:xxxxx@db/atmost",
		"postgres://atmost:p@ss@db/atmost":                                      "postgres://atmost:xxxxx@db/atmost",
		"postgres://atmost:s3cret@h1:5432,h2:5432/atmost":                       "postgres://atmost:xxxxx@h1:5432,h2:5432/atmost",
		"postgres://atmost@db/atmost?sslmode=disable&password=s3cret":           "postgres://atmost@db/atmost?sslmode=disable&password=xxxxx",
		"postgres://atmost@db/atmost?sslpassword=s3cret&sslmode=verify-full":    "postgres://atmost@db/atmost?sslpassword=xxxxx&sslmode=verify-full",
		"host=db user=atmost password=s3cret dbname=atmost":                     "host=db user=atmost password=xxxxx dbname=atmost",
		"host=db password='s3 cr\\'et' dbname=atmost":                           "host=db password=xxxxx dbname=atmost",
		"nats://atmost:s3cret@127.0.0.1:4222":                                   "nats://atmost:xxxxx@127.0.0.1:4222",
		"nats://s3cret@127.0.0.1:4222":                                          "nats://xxxxx@127.0.0.1:4222",
		"tls://s3cret@nats.example:4222":                                        "tls://xxxxx@nats.example:4222",
		"nats://a:s3cret@n1:4222,nats://b:s3cret@n2:4222,nats://s3cret@n3:4222": "nats://a:xxxxx@n1:4222,nats://b:xxxxx@n2:4222,nats://xxxxx@n3:4222",
		"nats://n1:4222,nats://u:s3cret@n2:4222":                                "nats://n1:4222,nats://u:xxxxx@n2:4222",
		"postgres://atmost@db/atmost":                                           "postgres://atmost@db/atmost",
		"nats://127.0.0.1:4222":                                                 "nats://127.0.0.1:4222",
		"":                                                                      "",
	} {
		got := redact.URL(raw)
		require.Equal(t, want, got, raw)
		require.NotContains(t, got, "s3cret", raw)
		require.NotContains(t, got, "p@ss", raw)
	}
}
