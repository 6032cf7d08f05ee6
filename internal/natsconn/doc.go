// Package natsconn is a role's NATS: its connection (Connect: PINGs that leave a silent server
// within seconds, reconnection for the life of the process), and the messages of its JetStream
// pull consumers (Next, which outlives a missed heartbeat; KeepAlive, which holds a message
// worked longer than its AckWait).
package natsconn
