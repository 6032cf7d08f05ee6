// Package matrix is the adapter for the client-server API of a Matrix homeserver: it sends a
// text message (an m.room.message event) to the room an account names, with
// PUT /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}.
//
// Settings (the JSON of platform.Account.Settings; unknown fields are refused):
//
//	{
//	  "homeserver": "https://matrix.example", // required; http only for a loopback host
//	  "room_id": "!abc:matrix.example",       // required; a room id, not an alias
//	  "user_id": "@bot:matrix.example",       // required; the account the access token is for
//	  "msgtype": "m.text",                    // optional: m.text (default) or m.notice
//	  "lookup_events": 1000,                  // optional: how many recent events the lookup reads
//	  "reconcile_delay": "10s",               // optional, default 10s
//	  "contract_version": "matrix/v3"         // optional, default "matrix/v3"
//	}
//
// The access token comes from the account's credential reference (env:NAME or file:/path,
// platform.ResolveCredential), never from the settings, and is added at send time as
// "Authorization: Bearer": it is never part of the prepared request or its hash.
//
// Action: "post", target "" (the room is the account's), request {"text": "..."}; anything else
// is refused by Prepare (platform.ErrUnsendable).
//
// The event's content is {"msgtype", "body": text, "io.atmost.delivery_key": the delivery key};
// the transaction id is TxnID(delivery key). The key in the content is what the lookup searches
// for; the transaction id is what the homeserver's own deduplication keys on, which atmost does
// not rely on (see docs/platforms.md#the-matrix-platform): it holds per access token, in the
// homeserver's memory, for a while (Dendrite: 30 to 60 minutes, forgotten on restart, and only
// for a send that already answered), so a resend would be a second message whenever any of that
// fails. atmost never resends an unknown outcome anyway.
//
// Send classifies the exchange by transport.Classify with DefinitiveStatuses; a 2xx naming the
// event (event_id) is Sent with the event id as the object id.
//
// ReadBack reads the event by id (GET .../rooms/{roomId}/event/{eventId}) and the latest edit
// its sender made of it (m.replace, through the relations API): the text is the edit's
// m.new_content body, else the event's body. A redacted event (a deletion) reads as
// platform.ErrNotFound, and an event of another room, sender, type or delivery key reads back
// with a text that says so.
//
// Lookup pages the room's recent events backwards (GET .../rooms/{roomId}/messages, dir=b), at
// most lookup_events of them, for an m.room.message of the account whose content carries the
// request's delivery key: found proves the message was sent. Not found proves nothing, so
// Capabilities declare no StatusLookup and the reconciler parks the intent for a person: the
// event may be older than the window, redacted since (a redaction strips the content, key
// included), or hidden from the account, and the homeserver keeps no record of a transaction id
// that a lookup could ask.
package matrix
