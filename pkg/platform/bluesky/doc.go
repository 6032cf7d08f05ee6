// Package bluesky is the adapter for the XRPC API of an AT Protocol PDS (Bluesky): it creates
// app.bsky.feed.post, app.bsky.feed.like, app.bsky.feed.repost and app.bsky.graph.follow
// records in the account's repository with com.atproto.repo.createRecord.
//
// Settings (the JSON of platform.Account.Settings; unknown fields are refused):
//
//	{
//	  "pds": "https://pds.example",      // required; http only for a loopback host
//	  "identifier": "did:plc:...",       // required; the account's DID (preferred) or handle
//	  "reconcile_delay": "10s",          // optional, default 10s
//	  "contract_version": "bluesky/v1"   // optional, default "bluesky/v1"
//	}
//
// The app password comes from the account's credential reference (env:NAME or file:/path,
// platform.ResolveCredential), never from the settings.
//
// Actions (the intent's action, target and request; unknown request fields are refused):
//
//	post    target ""                 request {"text": "...", "langs": ["en"]?}
//	reply   target parent's at-uri    request {"text", "langs"?, "parent": {"uri","cid"}, "root": {"uri","cid"}}
//	quote   target quoted at-uri      request {"text", "langs"?, "subject": {"uri","cid"}}
//	like    target post's at-uri      request {"subject": {"uri","cid"}}
//	repost  target post's at-uri      request {"subject": {"uri","cid"}}
//	follow  target the DID            request {}
//
// The target must equal the strong reference's uri (parent.uri, subject.uri). The producer
// gives the strong references: Prepare makes no network call, so everything the record links
// to is part of the request, of the delivery key, and of the prepared bytes.
//
// Record keys: every record gets RecordKey(delivery key), a TID made of the key's first 63
// bits, so a second create for the same intent meets the first record instead of making
// another, and getRecord under that key finds the intent's record (Lookup: Found). Per account
// and collection, two intents share a record key with probability about n²/2⁶⁴ over n
// intents; the second one then ends unknown, never as a second record.
//
// What the lookup proves: published, never not-sent, so Capabilities declare no StatusLookup
// and a RecordNotFound parks the intent for a person. A record the lost request created is
// absent again once the account deleted it, a moderator took it down (getRecord then answers
// RecordNotFound too), or another intent's like, repost or follow of the same subject replaced
// it, and nothing the PDS serves remembers it: a commit replaces the repository's root and
// drops the blocks no longer reached, so getRecord, listRecords, getRepo (with since),
// getBlocks and getLatestCommit show the repository as it is now. Only the host's event
// stream (com.atproto.sync.subscribeRepos) holds the create and the delete, and it is no
// proof either: it keeps a backfill window (a day by default) and nothing of a deleted
// account, it is one stream for every account of the host, and reading it from before the
// send needs a cursor taken before the send, which neither Prepare (no network call) nor
// Lookup (the request only) has. A repository not hosted where the settings point is answered
// by the AppView, which is eventually consistent besides.
//
// createdAt is the time of Prepare, in the prepared bytes and their hash: the dispatcher
// prepares once per attempt and sends exactly those bytes; a later attempt prepares again.
// So, unlike the other adapters, two Prepares of one request differ in createdAt.
//
// Send: a session is created once (createSession) and refreshed (refreshSession) when its
// access token nears expiry or the PDS refuses it; session calls create nothing and may be
// repeated. The createRecord is one request through transport.Client, classified by
// transport.Classify with DefinitiveStatuses, except that a 4xx saying the record already
// exists (by its XRPC error name, RecordAlreadyExists, or failing that by its message) is
// unknown (an earlier attempt created it). The reference PDS answers a create
// under a taken key with a 500 (unknown), and, for a like, repost or follow of the same
// subject, replaces the record in one commit (its duplicate-backlink rule).
package bluesky
