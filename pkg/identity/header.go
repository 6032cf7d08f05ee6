package identity

import "strings"

// DeliveryKeyHeader is the optional NATS message header in which a producer
// states the delivery key it computed.
const DeliveryKeyHeader = "Atmost-Delivery-Key"

// CheckDeliveryKeyHeader compares a producer's Atmost-Delivery-Key header
// value with the key computed from the envelope. The key is always computed
// from the envelope; the header can only confirm it, never override it.
//
// An empty header (after trimming spaces and tabs, which header syntax does
// not treat as part of the value) means the producer stated nothing, and is
// accepted. A value that does not parse as a DeliveryKey is a *RejectError
// with ReasonInvalidKeyHeader; a well-formed key that differs is a
// *RejectError with ReasonKeyMismatch. A caller with several header values
// checks each of them.
func CheckDeliveryKeyHeader(e Envelope, header string) error {
	header = strings.Trim(header, " \t")
	if header == "" {
		return nil
	}
	stated, err := ParseDeliveryKey(header)
	if err != nil {
		return reject(ReasonInvalidKeyHeader, DeliveryKeyHeader+": "+err.Error())
	}
	if computed := e.DeliveryKey(); stated != computed {
		return reject(ReasonKeyMismatch, DeliveryKeyHeader+" is "+stated.String()+" but the envelope's key is "+computed.String())
	}
	return nil
}
