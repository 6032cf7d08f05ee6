// Package email is the adapter for email: it submits a plain-text message over SMTP (RFC 5321
// submission, STARTTLS or implicit TLS, AUTH PLAIN) and reads it back over IMAP from a mailbox
// that holds a copy of every message the server accepted from the account (an archive or
// journal copy). Its settings are Settings; the password comes from the account's credential
// reference, never from the settings, and is never part of the prepared request or its hash.
//
// Action: "post", target "" (the recipients are the account's), request {"text": "...",
// "subject": "..."} with subject optional; anything else is refused by Prepare
// (platform.ErrUnsendable).
//
// The message carries Message-ID MessageID(delivery key, the sender's domain) and the header
// KeyHeader with the delivery key, so every attempt of an intent is the same message.
//
// Send makes one SMTP transaction and classifies its ending by the step it reached: any failure
// before the server's 354 to DATA is NotSent (the server never had the message's text), a 250
// to the final dot is Sent with the Message-ID as the object id, and anything after the 354 is
// Unknown. ReadBack and Lookup search the mailbox by Message-ID: found proves sent; not found
// proves nothing (no StatusLookup), because the copy may not have landed yet or may have been
// moved or deleted, and SMTP keeps nothing a client could ask about a transaction afterwards.
// docs/platforms.md#the-email-platform is the operator's reference.
package email
