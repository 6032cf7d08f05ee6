package bluesky

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The XRPC methods the adapter calls.
const (
	methodCreateSession  = "com.atproto.server.createSession"
	methodRefreshSession = "com.atproto.server.refreshSession"
	methodCreateRecord   = "com.atproto.repo.createRecord"
	methodGetRecord      = "com.atproto.repo.getRecord"
)

// xrpcError is the body of an XRPC error response: {"error": name, "message": text}.
type xrpcError struct {
	Name    string `json:"error"`
	Message string `json:"message"`
}

// parseXRPCError reads an error body; a body that is not one gives the zero value.
func parseXRPCError(body []byte) xrpcError {
	var e xrpcError
	_ = json.Unmarshal(body, &e)
	return e
}

// Error names of the reference PDS (bluesky-social/atproto, packages/xrpc-server and
// packages/pds) the adapter acts on.
const (
	// errExpiredToken: 400 from the PDS's own auth verifier when the access JWT expired (401
	// from an entryway or AppView); the request was refused before its handler ran.
	errExpiredToken = "ExpiredToken"
	// errInvalidToken: 400 (or 401) for a token that could not be verified.
	errInvalidToken = "InvalidToken"
	// errRecordNotFound: 400 from com.atproto.repo.getRecord when the repository has no
	// record under that collection and key (or it was taken down).
	errRecordNotFound = "RecordNotFound"
	// errRecordAlreadyExists: a create refused because a record exists under its collection
	// and key, whatever message text goes with it.
	errRecordAlreadyExists = "RecordAlreadyExists"
)

// sessionRefused reports whether a response says the access token is no longer good: the
// session must be refreshed (or created again) before the next call.
func sessionRefused(status int, e xrpcError) bool {
	return status == http.StatusUnauthorized ||
		(status == http.StatusBadRequest && (e.Name == errExpiredToken || e.Name == errInvalidToken))
}

// recordExists reports whether a refusal says a record already exists under the key of the
// create: an earlier attempt of the same intent created it. The reference PDS does not refuse
// so (its repository tree throws "There is already a value at key", which the XRPC server turns
// into a 500, an unknown outcome anyway); other PDS implementations may answer 400 or 409
// saying so, and such a 400 must not read as "nothing created". The error name is the
// protocol's statement (RecordAlreadyExists), read first; a message is free text that an
// implementation may word or translate at will, so the words below are a fallback only.
func recordExists(e xrpcError) bool {
	if e.Name == errRecordAlreadyExists {
		return true
	}
	name := strings.ToLower(e.Name)
	msg := strings.ToLower(e.Message)
	return strings.Contains(name, "duplicate") || strings.Contains(name, "conflict") ||
		strings.Contains(msg, "already exists") || strings.Contains(msg, "already a value at key") ||
		strings.Contains(msg, "duplicate") || strings.Contains(msg, "conflict")
}
