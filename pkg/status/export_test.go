package status

// Helpers for the external tests (package status_test), which may import
// pkg/apply: apply reports its failures with this package's reasons.
var (
	StartForge = startForge
	AgentAuth  = agentAuth
	GitOut     = gitOut
	ReadyDoc   = readyDoc
	FailUnit   = failUnit
)

const Rev1 = rev1
