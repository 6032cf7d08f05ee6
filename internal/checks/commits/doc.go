// Package commits holds the tests of the commit-message rule's two checks: scripts/commit-msg,
// the hook a contributor installs with make hooks, and scripts/check-commits, which make lint
// runs on every commit after scripts/commit-base. A check that cannot go red holds nothing, so
// each is fed a message that breaks the rule and must refuse it.
package commits
