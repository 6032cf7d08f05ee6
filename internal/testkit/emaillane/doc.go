// Package emaillane is the integration lane of the email adapter (pkg/platform/email) against
// real mail servers: Postfix (SMTP submission with STARTTLS and AUTH) and Dovecot (IMAP),
// from Debian's packages, installed and configured on loopback by scripts/email/install and
// started by scripts/email/start.
//
// Its tests run the adapter conformance suite (platformtest) against them, and 500 intents
// through the real ledger, relay, dispatcher and reconciler with 5 % of the submissions'
// answers lost after the final dot reached Postfix, counting what the mailboxes themselves
// hold. Where the servers are not installed they skip with a message saying so, unless
// ATMOST_EMAIL_LANE=1 (set by `make test-email`) or CI=true, where that is a failure.
//
// Shared starts the servers and returns the lane's configuration; Proxy sits between the
// adapter and them and spoils the answer of a submission at a chosen moment, so that what the
// adapter sees is known while what Postfix did is read from the mailboxes over IMAP.
package emaillane
