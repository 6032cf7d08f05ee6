package role_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// A role warns when its PostgreSQL runs without autovacuum, and only then: the test reads the
// server's setting and expects the warning exactly when it is off.
func TestARoleWarnsWhenAutovacuumIsOff(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	var setting string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SHOW autovacuum`).Scan(&setting))
	core, logs := observer.New(zapcore.WarnLevel)
	role.WarnWithoutAutovacuum(context.Background(), db.Pool, zap.New(core))
	warned := func() bool { return logs.FilterMessageSnippet("autovacuum off").Len() == 1 }
	if setting == "off" {
		require.Eventually(t, warned, 30*time.Second, 10*time.Millisecond, "the server's autovacuum is off")
		return
	}
	// Asked and answered without a warning: give the check the time it takes, then none.
	time.Sleep(500 * time.Millisecond)
	require.False(t, warned(), "the server's autovacuum is %s", setting)
}
