// Package webhookrecv is a real HTTP receiver of flotilla notify's webhook
// events for tests: it checks generic-hmac's X-Signature with its key, as
// a receiver in production would, keeps what it accepted, and can refuse
// a send to show that it is told again.
package webhookrecv
