package ledger_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// The console's reads go through the partial index of each state, as planned both for the
// arguments given (a custom plan) and for any (the generic plan a prepared statement ends up
// with): the page of every state names each state's index, a page of one state only its own,
// and none reads the intents sequentially or through the primary key. That is what keeps a
// page's cost the rows it examines on a ledger of millions (BenchmarkConsolePages measures it).
func TestConsoleReadsGoThroughThePartialIndexOfEachState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO intents (delivery_key, account_id, action, request, state, reason, updated_at, lease_expires_at, attempt_token, epoch, generation)
		SELECT decode(md5(g::TEXT) || md5('k' || g::TEXT), 'hex'), $1, 'post', '{"text":"t ' || g || '"}', s.state, s.state,
		       now() - g * INTERVAL '1 second',
		       (CASE WHEN s.state = 'authorized' THEN now() + INTERVAL '1 minute' END),
		       (CASE WHEN s.state = 'authorized' THEN decode(md5('t' || g::TEXT), 'hex') END),
		       (CASE WHEN s.state = 'authorized' THEN 1 END), (CASE WHEN s.state = 'authorized' THEN g END)
		FROM generate_series(1, 20000) g,
		     LATERAL (SELECT (CASE WHEN g % 50 = 1 THEN 'parked' WHEN g % 50 = 2 THEN 'failed' WHEN g % 50 = 3 THEN 'indeterminate'
		                           WHEN g % 50 = 4 THEN 'pending' WHEN g % 50 = 5 THEN 'authorized' ELSE 'published' END) AS state) s`, account)
	e.exec(`ANALYZE intents`)
	conn, err := e.pool.Acquire(e.ctx)
	require.NoError(t, err)
	defer conn.Release()
	x := &explainer{t: t, conn: conn}
	q := dbsqlc.New(x)
	// The parked are read through either of their indexes: intents_parked_at_idx in time order,
	// or intents_parked_idx and a sort when the planner counts them fewer than a window.
	all := []string{"intents_published_at_idx", "intents_parked", "intents_sweep_idx", "intents_lease_expires_idx"}
	browse := func(state string) dbsqlc.IntentsBrowseParams {
		return dbsqlc.IntentsBrowseParams{State: state, BeforeAt: time.Now(), BeforeKey: []byte{}, Since: time.Unix(0, 0), ScanRows: 5000, MaxRows: 51}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err = conn.Exec(e.ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		for name, c := range map[string]struct {
			run  func() error
			uses []string
		}{
			"every state": {func() error { _, err := q.IntentsBrowse(e.ctx, browse("")); return err }, all},
			"parked":      {func() error { _, err := q.IntentsBrowse(e.ctx, browse("parked")); return err }, []string{"intents_parked"}},
			"published":   {func() error { _, err := q.IntentsBrowse(e.ctx, browse("published")); return err }, []string{"intents_published_at_idx"}},
			"failed":      {func() error { _, err := q.IntentsBrowse(e.ctx, browse("failed")); return err }, []string{"intents_sweep_idx"}},
			"waiting":     {func() error { _, err := q.IntentsWaiting(e.ctx); return err }, []string{"intents_parked", "intents_sweep_idx", "intents_lease_expires_idx"}},
			"changed": {func() error { _, err := q.IntentsChanged(e.ctx, time.Now().Add(-time.Hour)); return err },
				[]string{"intents_published_at_idx", "intents_parked", "intents_sweep_idx", "intents_lease_expires_idx"}},
		} {
			require.ErrorIs(t, c.run(), errExplained)
			for _, idx := range c.uses {
				require.Contains(t, x.plan, idx, "%s, %s:\n%s", name, mode, x.plan)
			}
			require.NotContains(t, x.plan, "Seq Scan on intents", "%s, %s:\n%s", name, mode, x.plan)
			require.NotContains(t, x.plan, "intents_pkey", "%s, %s:\n%s", name, mode, x.plan)
			if name == "parked" || name == "published" {
				// One state: the other branches are switched off at run time, or planned away.
				for _, other := range all {
					if other != c.uses[0] && strings.Contains(x.plan, other) {
						require.Contains(t, x.plan, "One-Time Filter", "%s, %s:\n%s", name, mode, x.plan)
					}
				}
			}
		}
	}
}

// IntentsBrowse reads pending, failed and indeterminate intents one reason at a time (that is
// how intents_sweep_idx is ordered by time): a reason of those states the statement does not
// name would hide its intents from the console. Its branches are exactly the reasons the state
// machine gives those states.
func TestBrowseNamesEveryReasonOfTheSweptStates(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("queries", "browse.sql"))
	require.NoError(t, err)
	sql := string(b)
	sql = sql[strings.Index(sql, "-- name: IntentsBrowse"):]
	sql = sql[:strings.Index(sql[1:], "-- name:")+1]
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`state = '(\w+)' AND reason = '(\w+)'`).FindAllStringSubmatch(sql, -1) {
		got[m[1]+"/"+m[2]] = true
	}
	want := map[string]bool{}
	for r, rule := range atmosttype.Reasons() {
		switch rule.State {
		case ledger.Pending, ledger.Failed, ledger.Indeterminate:
			want[string(rule.State)+"/"+string(r)] = true
		}
	}
	require.Equal(t, want, got)
}
