// Package rollout is the state of an application's progressive rollout as
// the fleet repo records it: rendered/rollouts/<app>.yaml says which
// revision of the application is being rolled out, how many of its waves
// are released, and whether it is paused. Only flotilla
// commands write it (render starts a rollout when an application's
// revision changes; `flotilla rollout advance` releases further waves), so
// the hub stays a stateless CLI and advancing a rollout is a commit.
//
// The waves themselves come from the fleet model (fleet.Repo.Waves); the
// compiler (hub/fleetrender) holds back the content of clusters in waves not
// yet released.
package rollout
